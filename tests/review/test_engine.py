"""Engine behaviour users rely on: name resolution, robustness, suppression."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from torchwise.findings import Severity
from torchwise.review import ReviewSettings, registry, review_source
from torchwise.review.engine.context import Context


class _Exploding(registry.Rule):
    """A rule with a bug, to prove one broken rule cannot stop a review."""

    code = "TW998"
    name = "exploding"
    family = "syntax"
    severity = Severity.WARNING
    message = "never"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        raise ValueError("boom")


def test_a_crashing_rule_is_reported_and_the_others_still_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry.all_rules()  # load the real rules first
    monkeypatch.setitem(registry._RULES, "TW998", registry.RuleInfo(_Exploding, ("Call",), ()))
    source = "import torch\nfrom torch.autograd import Variable\nx = Variable(torch.ones(2))\n"
    findings = review_source(source, "t.py", ReviewSettings(select=("TW998", "TW403")))
    codes = sorted(f.code for f in findings)
    assert codes == ["TW000", "TW403"]
    internal = next(f for f in findings if f.code == "TW000")
    assert "internal error in TW998" in internal.message


@pytest.mark.parametrize(
    "imports, call",
    [
        ("import torch", "torch.autograd.Variable(x)"),
        ("import torch as T", "T.autograd.Variable(x)"),
        ("from torch import autograd", "autograd.Variable(x)"),
        ("import torch.autograd as ag", "ag.Variable(x)"),
        ("from torch.autograd import Variable as V", "V(x)"),
    ],
)
def test_imports_resolve_however_they_are_written(imports: str, call: str) -> None:
    findings = review_source(f"{imports}\ny = {call}\n", "t.py", ReviewSettings(select=("TW403",)))
    assert [f.code for f in findings] == ["TW403"]


def test_unresolved_names_stay_silent() -> None:
    source = "from mylib import autograd\ny = autograd.Variable(x)\n"
    assert review_source(source, "t.py", ReviewSettings(select=("TW403",))) == []


def test_imports_after_use_are_known() -> None:
    source = "def f(x):\n    return Variable(x)\n\nfrom torch.autograd import Variable\n"
    findings = review_source(source, "t.py", ReviewSettings(select=("TW403",)))
    assert [f.line for f in findings] == [2]


def test_syntax_error_is_a_finding_not_a_crash() -> None:
    findings = review_source("def f(:\n", "bad.py", ReviewSettings())
    assert [(f.code, f.line) for f in findings] == [("TW000", 1)]


def test_noqa_on_the_line_and_for_the_file() -> None:
    settings = ReviewSettings(select=("TW403",))
    line = "import torch\ny = torch.autograd.Variable(x)  # noqa: TW403\n"
    other = "import torch\ny = torch.autograd.Variable(x)  # noqa: TW101\n"
    whole = "# torchwise: noqa\nimport torch\ny = torch.autograd.Variable(x)\n"
    assert review_source(line, "t.py", settings) == []
    assert len(review_source(other, "t.py", settings)) == 1
    assert review_source(whole, "t.py", settings) == []


def test_columns_count_characters_not_bytes() -> None:
    source = "import torch\ns = 'é'; y = torch.autograd.Variable(x)\n"
    (finding,) = review_source(source, "t.py", ReviewSettings(select=("TW403",)))
    assert finding.column == source.splitlines()[1].index("torch") + 1


def test_a_file_with_a_stray_syntax_error_is_still_reviewed() -> None:
    source = (
        "import torch\n"
        "for x in loader:\n"
        "    opt.zero_grad()\n"
        "    model(x).sum().backward()\n"
        "    opt.step()\n"
        "    break\n"
        "try:jupyter\n"
        "\tprint('restored')\n"
        "except:\n"
        "\tpass\n"
    )
    codes = sorted(f.code for f in review_source(source, "train.py", ReviewSettings()))
    assert codes == ["TW000", "TW123", "TW604"]
    hopeless = "def f(:\n" * 20
    assert [f.code for f in review_source(hopeless, "x.py", ReviewSettings())] == ["TW000"]


def test_filters_only_skip_what_the_rule_ignores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule's ``call_names``/``call_methods`` let the engine skip its
    ``visit_Call``, and its ``needs_text`` skip a file; every fixture gives the
    same findings without them, so no filter is narrower than the rule's own test."""
    from torchwise.review import all_rules
    from torchwise.review.settings import ReviewSettings

    fixtures = sorted((Path(__file__).parent / "fixtures").glob("TW*.py"))
    settings = ReviewSettings(select=("ALL",))
    filtered = {path: review_source(path.read_text(), str(path), settings) for path in fixtures}
    rules = [info.cls for info in all_rules().values()]
    assert any(rule.call_names or rule.call_methods for rule in rules)
    assert any(rule.needs_text for rule in rules)
    for rule in rules:
        monkeypatch.setattr(rule, "call_names", None)
        monkeypatch.setattr(rule, "call_methods", None)
        monkeypatch.setattr(rule, "needs_text", ())
    for path, found in filtered.items():
        assert review_source(path.read_text(), str(path), settings) == found, path.name


def test_a_rule_that_needs_text_is_not_run_on_a_file_without_it() -> None:
    """``needs_text`` is matched against the lowercased source: a file that sets
    ``LR`` still gets TW145; one that never mentions a learning rate is not
    walked for it (and has nothing it could report)."""
    from torchwise.review.engine.walk import _rules_for

    enabled = frozenset({"TW145", "TW414"})
    shouting = (
        "import torch\nLR = 0.1\nmodel = torch.nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(model.parameters())\n"
    )
    assert [f.code for f in review_source(shouting, "train.py", ReviewSettings())] == ["TW145"]
    assert {rule.code for rule in _rules_for(shouting, enabled)} == {"TW145"}
    assert _rules_for("import torch\nx = torch.ones(2)\n", enabled) == []


def test_direct_effects_asks_only_the_predicates_a_call_can_satisfy() -> None:
    """``direct_effects`` skips the method-specific predicates for other methods;
    on every call of every fixture it says what asking all of them says."""
    from torchwise.review.engine.effects import PREDICATES, direct_effects
    from torchwise.review.engine.walk import Walk

    calls = 0
    for path in sorted((Path(__file__).parent / "fixtures").glob("TW*.py")):
        source = path.read_text()
        ctx = Context(str(path), source, None)
        Walk(ctx, []).run(ast.parse(source))
        for call in ctx.module.calls:
            asked_all = [name for name, predicate in PREDICATES.items() if predicate(call)]
            assert direct_effects(call) == asked_all, (path.name, call.node.lineno)
            calls += 1
    assert calls > 500


def test_remote_code_at_a_pinned_revision_is_a_hint() -> None:
    source = (
        "from transformers import AutoModel\n"
        "a = AutoModel.from_pretrained('x/y', trust_remote_code=True)\n"
        "b = AutoModel.from_pretrained('x/y', trust_remote_code=True, revision='4f2a9c1')\n"
    )
    found = review_source(source, "train.py", ReviewSettings(select=("TW304",)))
    assert [(f.line, f.severity.value) for f in found] == [(2, "warning"), (3, "info")]
