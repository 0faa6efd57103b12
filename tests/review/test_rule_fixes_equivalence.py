"""Safe fixes of the deprecated/numerics rules compute what the original computed.

The fixture tests check the fixed *text*; these run the original and the fixed
code with real torch on random inputs and compare the results, which is what
"safe" promises. They also pin the settings-dependent behaviour of TW301.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from torchwise.review import Applicability, ReviewSettings, review_source
from torchwise.review.fixes import fix_source

torch = pytest.importorskip("torch")

PRELUDE = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


def _fixed(code: str, rule: str, minimum: Applicability = Applicability.SAFE) -> str:
    settings = ReviewSettings(select=(rule,))
    source = PRELUDE + f"result = {code}\n"
    fixed, count = fix_source(source, lambda text: review_source(text, "t.py", settings), minimum)
    assert count == 1, f"{rule} offered no {minimum.value} fix for {code!r}"
    return fixed


def _run(source: str, inputs: dict[str, Any]) -> Any:
    namespace = dict(inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(source, "t.py", "exec"), namespace)
    return namespace["result"]


def _inputs() -> dict[str, Any]:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(5, 5, generator=generator, dtype=torch.float64)
    return {
        "x": torch.randn(4, 6, 3, generator=generator),
        "a": a,
        "spd": a @ a.T + 5 * torch.eye(5, dtype=torch.float64),
        "b": torch.randn(5, 7, generator=generator, dtype=torch.float64),
        "c": torch.randn(7, 2, generator=generator, dtype=torch.float64),
        "u": torch.randn(4, generator=generator),
        "logits": torch.randn(8, 10, generator=generator) * 30,
        "labels": torch.randint(0, 10, (8,), generator=generator),
        "image": torch.randn(1, 2, 4, 4, generator=generator),
    }


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, tuple):
        return all(_same(x, y) for x, y in zip(left, right, strict=True))
    if isinstance(left, torch.nn.Module):
        return _same(left(_inputs()["image"]), right(_inputs()["image"]))
    return left.dtype == right.dtype and torch.equal(left, right)


EXACT = [
    ("TW406", "torch.norm(x)"),
    ("TW406", "torch.norm(x, dim=-1)"),
    ("TW406", "torch.norm(x, p=1, dim=1, keepdim=True)"),
    ("TW406", "torch.norm(x, 3, -1, True)"),
    ("TW406", 'torch.norm(x, p="fro", dim=0)'),
    ("TW406", "torch.norm(x, p=0.5)"),
    ("TW406", "torch.chain_matmul(a, b, c)"),
    ("TW406", "torch.qr(b)"),
    ("TW406", "torch.qr(b, some=False)"),
    ("TW406", "torch.cholesky(spd)"),
    ("TW406", "torch.ger(u, u)"),
    ("TW407", "torch.range(0, 9)"),
    ("TW407", "torch.range(3, 17, 4)"),
    ("TW407", "torch.range(5, -6, -3)"),
    ("TW407", "torch.range(0, 5, dtype=torch.int64)"),
    ("TW405", "F.cross_entropy(logits, labels, size_average=False)"),
    ("TW405", "F.cross_entropy(logits, labels, reduce=False)"),
    ("TW405", "F.cross_entropy(logits, labels, size_average=False, reduce=True)"),
    ("TW405", 'F.nll_loss(logits, labels, reduction="sum", reduce=False)'),
    ("TW405", "nn.MSELoss(size_average=False)(x, x * 2)"),
    ("TW405", "nn.L1Loss(size_average=True, reduce=None)(x, x * 2)"),
    ("TW410", "nn.utils.clip_grad_norm([nn.Parameter(x)], 1.0)"),
    ("TW412", "F.upsample(image, scale_factor=2)"),
    ("TW412", "F.upsample_bilinear(image, scale_factor=2)"),
    ("TW412", "F.upsample_nearest(image, (6, 6))"),
    ("TW412", "nn.UpsamplingBilinear2d(scale_factor=3)"),
    ("TW404", "F.sigmoid(x)"),
]


@pytest.mark.parametrize(("rule", "code"), EXACT)
def test_safe_fix_gives_identical_results(rule: str, code: str) -> None:
    fixed = _fixed(code, rule)
    original = _run(PRELUDE + f"result = {code}\n", _inputs())
    assert _same(original, _run(fixed, _inputs())), fixed


@pytest.mark.parametrize(
    ("rule", "code"),
    [
        ("TW501", "torch.log(F.softmax(logits, dim=-1))"),
        ("TW501", "logits.softmax(1).log()"),
        ("TW507", "torch.log(torch.sigmoid(logits * 5))"),
    ],
)
def test_stable_fix_agrees_where_the_original_was_finite(rule: str, code: str) -> None:
    original = _run(PRELUDE + f"result = {code}\n", _inputs())
    fixed = _run(_fixed(code, rule), _inputs())
    finite = torch.isfinite(original)
    normal = finite & (original > -80)  # below, the probabilities were float32 subnormals
    assert torch.allclose(original[normal], fixed[normal], atol=1e-4)
    # ... and is finite everywhere: the logits are scaled so softmax underflows.
    assert not finite.all() and torch.isfinite(fixed).all()


def test_bce_with_logits_fix_matches_within_the_clamp() -> None:
    code = "F.binary_cross_entropy(torch.sigmoid(x), (x > 0).float())"
    fixed = _fixed(code, "TW502", Applicability.UNSAFE)
    assert "binary_cross_entropy_with_logits(x," in fixed
    inputs = _inputs()
    assert torch.allclose(_run(PRELUDE + f"result = {code}\n", inputs), _run(fixed, inputs))


def _tw301(source: str, settings: ReviewSettings | None) -> list[str]:
    return [f.message for f in review_source(source, "t.py", settings) if f.code == "TW301"]


def test_torch_load_without_weights_only_depends_on_min_torch_version() -> None:
    source = "import torch\nstate = torch.load('model.pt')\n"
    assert _tw301(source, ReviewSettings(select=("TW301",)))  # default minimum: 2.4
    assert not _tw301(source, ReviewSettings(select=("TW301",), min_torch_version=(2, 6)))
    explicit = "import torch\nstate = torch.load('model.pt', weights_only=False)\n"
    assert _tw301(explicit, ReviewSettings(select=("TW301",), min_torch_version=(2, 6)))


def test_torch_load_fix_is_unsafe_only() -> None:
    settings = ReviewSettings(select=("TW301",))
    source = "import torch\nstate = torch.load('model.pt')\n"
    (finding,) = review_source(source, "t.py", settings)
    assert finding.fix is not None and finding.fix.applicability is Applicability.UNSAFE

    def analyse(text: str) -> list[Any]:
        return review_source(text, "t.py", settings)

    assert fix_source(source, analyse, Applicability.SAFE) == (source, 0)
    fixed, _ = fix_source(source, analyse, Applicability.UNSAFE)
    assert "torch.load('model.pt', weights_only=True)" in fixed


def test_example_project_findings_of_these_families() -> None:
    from pathlib import Path

    from torchwise.review import review_paths

    root = Path(__file__).resolve().parents[2] / "examples" / "cifar_project"
    settings = ReviewSettings(select=("TW127", "TW128", "TW3", "TW4", "TW5"), extend_select=())
    report = review_paths([root], settings, jobs=1, cache_dir=None)
    found = sorted((Path(f.path).name, f.line, f.code) for f in report.findings)
    assert ("evaluate.py", 18, "TW127") in found
    assert ("evaluate.py", 27, "TW501") in found
    assert ("train.py", 48, "TW301") in found
    # data.py divides by a constant std tensor: not a finding.
    assert not [item for item in found if item[0] in {"data.py", "model.py"}]
