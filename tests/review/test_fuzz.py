"""No source text, however malformed, makes the reviewer raise.

Hypothesis feeds arbitrary text, deeply nested expressions, null bytes, odd
unicode and mutations of real PyTorch snippets to ``review_source`` and
``analyse_source`` with every rule enabled; each must return findings (a
file that does not parse is one TW000), never raise.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchwise.findings import Finding
from torchwise.review import ReviewSettings, review_source
from torchwise.review.analysis import analyse_source

EVERY_RULE = ReviewSettings(select=("ALL",))
FIXTURES = Path(__file__).parent / "fixtures"
SNIPPETS = [
    path.read_text()
    for path in sorted(FIXTURES.glob("TW*.py"))
    if not path.name.endswith(".fixed.py")
] + [
    (Path(__file__).parents[2] / "examples" / "cifar_project" / name).read_text()
    for name in ("train.py", "evaluate.py", "model.py", "data.py")
    if (Path(__file__).parents[2] / "examples" / "cifar_project" / name).exists()
]

TOKENS = [
    "torch", "nn", "F", ".", "(", ")", "[", "]", "{", "}", ":", ",", "=", "+=", "\n", "    ",
    "def ", "class ", "for ", "in ", "with ", "lambda ", "return ", "yield ", "async ", "await ",
    "loss", "model", "optimizer", ".backward()", ".step()", ".zero_grad()", ".eval()",
    "torch.no_grad()", "torch.load(", "weights_only=", "True", "None", "*", "**", "@", "#",
    "# noqa: TW101", "# torchwise: noqa", "\x00", "\ufeff", "é", "😀", "\u202e", "'", '"""', "\\",
    "import torch\n", "from torch import nn\n", "nn.Module", "self.", "forward",
    "super().__init__()",
]  # fmt: skip


def check(source: str) -> list[Finding]:
    findings = review_source(source, "fuzz.py", EVERY_RULE)
    again = analyse_source(source, "fuzz.py", EVERY_RULE, enabled=EVERY_RULE.enabled)
    assert findings == again.findings
    for finding in findings:
        assert finding.line >= 1 and finding.column >= 1
        assert finding.message
    return findings


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.text())
def test_arbitrary_text(source: str) -> None:
    check(source)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_token_soup(source: str) -> None:
    check(source)


@FUZZ
@given(
    st.sampled_from(SNIPPETS),
    st.lists(
        st.tuples(
            st.floats(0, 1), st.integers(0, 40), st.sampled_from(TOKENS) | st.text(max_size=4)
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_mutated_pytorch_snippets(snippet: str, mutations: list[tuple[float, int, str]]) -> None:
    source = snippet
    for where, cut, text in mutations:
        at = int(where * len(source))
        source = source[:at] + text + source[at + cut :]
    check(source)


@settings(max_examples=25, deadline=None)
@given(st.integers(50, 3000), st.sampled_from(["(", "[", "-", "not ", "f(", "x+", "lambda: "]))
def test_deeply_nested_expressions(depth: int, opener: str) -> None:
    closer = {"(": ")", "[": "]", "f(": ")"}.get(opener, "")
    source = f"import torch\ny = {opener * depth}1{closer * depth}\nloss.backward()\n"
    findings = check(source)
    # either analysed, or one TW000 saying why not: never an exception
    assert all(f.code != "TW000" or f.line >= 1 for f in findings)


def test_deep_statement_nesting_and_long_chains() -> None:
    nested = "".join("    " * i + "if x:\n" for i in range(90)) + "    " * 90 + "pass\n"
    check(nested)
    check("x = " + " + ".join(["a"] * 20000) + "\n")
    check("torch" + ".a" * 5000 + "()\n")
    check("f" + "()" * 5000 + "\n")


def test_null_bytes_and_odd_unicode() -> None:
    assert [f.code for f in check("x = 1\x00\n")] == ["TW000"]
    check("\ufeffimport torch\n")
    check("é = torch.ones(2)\nprint(é)  # 😀\n")
    check("x = '\ud800'\n")  # a lone surrogate
    check("\r\n".join(["import torch", "m = torch.nn.Linear(2, 2)", "m.eval"]))
    check("\x0c\x0b\n")
