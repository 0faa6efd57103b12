"""The doctor API and CLI: state is left untouched, reports render, errors are clear."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch import nn

from torchwise.cli import app
from torchwise.doctor import (
    CHECK_IDS,
    DoctorError,
    DoctorInterrupted,
    Options,
    Status,
    assert_healthy,
    check,
)
from torchwise.errors import TorchwiseError

sys.path.insert(0, str(Path(__file__).parent))
from doctor_bugs import BUGGY, CLEAN, SmallCNN, build


def fingerprint(model: nn.Module) -> dict[str, Any]:
    """Everything check() promises not to change, read independently of its Snapshot."""
    return {
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "modes": [(n, m.training) for n, m in model.named_modules()],
        "requires_grad": [(n, p.requires_grad) for n, p in model.named_parameters()],
        "grads": [
            (n, None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()
        ],
        "hooks": [
            (n, len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
            for n, m in model.named_modules()
        ],
        "torch_rng": torch.get_rng_state().clone(),
        "numpy_rng": np.random.get_state()[1].copy(),
        "python_rng": random.getstate(),
        "dtype": torch.get_default_dtype(),
        "grad_enabled": torch.is_grad_enabled(),
        "global_hooks": len(torch.nn.modules.module._global_forward_hooks),
    }


def same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in a["state"]:
        assert torch.equal(a["state"][key], b["state"][key]), key
    for key in ("modes", "requires_grad", "hooks", "python_rng", "dtype", "grad_enabled",
                "global_hooks"):  # fmt: skip
        assert a[key] == b[key], key
    assert torch.equal(a["torch_rng"], b["torch_rng"])
    assert np.array_equal(a["numpy_rng"], b["numpy_rng"])
    for (n, ga), (_, gb) in zip(a["grads"], b["grads"], strict=True):
        assert (ga is None) == (gb is None), n
        assert ga is None or torch.equal(ga, gb), n


@pytest.mark.parametrize("check_id", CHECK_IDS)
def test_check_leaves_model_and_global_state_untouched(check_id: str) -> None:
    torch.manual_seed(0)
    model = SmallCNN()
    model.eval()
    model.bn2.train()  # a per-submodule mode the caller chose
    model.conv1.bias.requires_grad_(False)
    model.head.weight.grad = torch.ones_like(model.head.weight)
    handle = model.head.register_forward_hook(lambda m, a, o: None)
    np.random.seed(3)
    random.seed(3)
    x = torch.randn(4, 3, 8, 8)
    x_before = x.clone()
    before = fingerprint(model)
    check(model, x, [check_id])
    same(before, fingerprint(model))
    assert torch.equal(x, x_before)
    handle.remove()  # the caller's handle still works
    assert len(model.head._forward_hooks) == 0


@pytest.mark.slow
def test_state_restored_even_for_stateful_and_buggy_models() -> None:
    for name in ("carried-state", "numpy-noise", "log-of-negative", "per-sample-batchnorm"):
        case = next(c for c in BUGGY if c.name == name)
        model, inputs = build(case)
        before = fingerprint(model)
        attrs = {k: v for k, v in vars(model).items() if not k.startswith("_")}
        check(model, inputs, **case.options)
        same(before, fingerprint(model))
        assert {k: v for k, v in vars(model).items() if not k.startswith("_")} == attrs


def test_inputs_as_tuple_and_kwargs() -> None:
    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * scale

    x, s = torch.randn(6, 4), torch.ones(6, 1)
    ids = ["grad-flow", "batch-independence"]
    by_args = check(TwoInputs(), (x, s), ids)
    by_kwargs = check(TwoInputs(), {"x": x, "scale": s}, ids)
    assert by_args.ok and by_kwargs.ok
    assert by_args.inputs == ["f32[6,4]", "f32[6,1]"]


def test_loss_choice_and_target() -> None:
    model, x = build(CLEAN[0])
    assert "cross_entropy over 5 classes" in check(model, x, ["init-loss"]).loss
    report = check(model, x, ["grad-flow"], loss="mse")
    assert report.loss.startswith("mse_loss")
    report = check(model, x, ["init-loss"], target=torch.randint(0, 2, (8, 5)).float())
    assert report.loss.startswith("binary_cross_entropy")
    assert check(model, x, ["init-loss"], loss="torch.nn.functional:l1_loss").loss.startswith(
        "torch.nn.functional:l1_loss"
    )
    regressor = nn.Linear(16, 1)
    assert check(regressor, x, ["init-loss"])["init-loss"].status is Status.SKIP
    with pytest.raises(TorchwiseError, match="not one of"):
        check(model, x, ["grad-flow"], loss="nonsense")


def test_bad_input_is_a_clear_error() -> None:
    model, x = build(CLEAN[0])
    with pytest.raises(TorchwiseError, match="unknown check"):
        check(model, x, ["grad-flo"])
    with pytest.raises(TorchwiseError, match=r"forward of MLP raised in fc1 \(Linear\)"):
        check(model, torch.randn(8, 3), ["grad-flow"])


def test_assert_healthy_raises_a_readable_error() -> None:
    case = next(c for c in BUGGY if c.name == "unused-layer")
    model, x = build(case)
    with pytest.raises(DoctorError) as info:
        assert_healthy(model, x, ["grad-flow", "nan-inf"])
    text = str(info.value)
    assert "grad-flow (fail)" in text and "fc_extra.weight" in text and "fix:" in text
    assert info.value.report["nan-inf"].status is Status.PASS
    clean, x = build(CLEAN[0])
    assert assert_healthy(clean, x, ["grad-flow"]).ok


def test_renderings() -> None:
    case = next(c for c in BUGGY if c.name == "detached-branch")
    model, x = build(case)
    report = check(model, x, ["grad-flow", "nan-inf"])
    data = json.loads(report.to_json())
    assert data["schema_version"] == 1 and data["ok"] is False
    assert [c["id"] for c in data["checks"]] == ["grad-flow", "nan-inf"]
    first = data["checks"][0]
    assert first["status"] == "fail" and "aux.weight" in first["where"]
    assert set(first) == {
        "id",
        "status",
        "summary",
        "evidence",
        "where",
        "causes",
        "fix",
        "seconds",
    }
    text = report.to_text()
    assert "FAIL grad-flow" in text and "cause:" in text
    md = report.to_markdown()
    assert md.startswith("## torchwise doctor") and "| `grad-flow` | **FAIL** |" in md


def test_cli_exit_codes_and_formats(tmp_path: Path) -> None:
    src = tmp_path / "nets.py"
    src.write_text(
        "import torch\nfrom torch import nn\n"
        "class Good(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(6, 3)\n"
        "    def forward(self, x):\n        return self.fc(x)\n"
        "class Bad(Good):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.unused = nn.Linear(6, 3)\n"
    )
    runner = CliRunner()
    ok = runner.invoke(app, ["doctor", f"{src}:Good", "-i", "f32[8,6]", "--checks",
                             "grad-flow,nan-inf", "--format", "json"])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    bad = runner.invoke(app, ["doctor", f"{src}:Bad", "-i", "f32[8,6]", "--checks", "grad-flow"])
    assert bad.exit_code == 1 and "unused.weight" in bad.output
    md = runner.invoke(app, ["doctor", f"{src}:Good", "-i", "f32[8,6]", "--checks", "init-loss",
                             "--format", "markdown", "--target-spec", "i64[8]<3"])  # fmt: skip
    assert md.exit_code == 0 and "cross_entropy over 3 classes" in md.output
    usage = runner.invoke(app, ["doctor", f"{src}:Good", "-i", "f32[8,6]", "--checks", "nope"])
    assert usage.exit_code == 2 and "unknown check id" in usage.output


@pytest.mark.slow
def test_zoo_resnet18_full_suite_is_healthy() -> None:
    from torchwise.target import resolve_target

    resolved = resolve_target("zoo:resnet18", inputs=["f32[4,3,32,32]"])
    report = check(resolved.model, resolved.args)
    flagged = {r.id: r.summary for r in report if r.status in (Status.FAIL, Status.WARN)}
    assert flagged == {}


def test_parameters_feeding_only_secondary_outputs_are_not_unused() -> None:
    class WithPooler(nn.Module):  # like BERT: (hidden states, pooled) with the loss on the first
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(6, 4)
            self.pooler = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.body(x)
            return h, torch.tanh(self.pooler(h))

    report = check(WithPooler(), torch.randn(8, 6), ["grad-flow", "param-update"])
    assert report.ok, report.to_text()
    assert report["grad-flow"].evidence["feed_only_other_outputs"] == [
        "pooler.bias",
        "pooler.weight",
    ]


def test_results_stream_as_each_check_finishes() -> None:
    model, x = build(CLEAN[0])
    seen: list[str] = []
    report = check(
        model, x, ["grad-flow", "nan-inf", "init-loss"], on_result=lambda r: seen.append(r.id)
    )
    assert seen == ["grad-flow", "init-loss", "nan-inf"] == [r.id for r in report]


def test_ctrl_c_keeps_the_finished_checks_and_the_model() -> None:
    model, x = build(CLEAN[0])
    before = fingerprint(model)

    def stop_after_first(result: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(DoctorInterrupted) as info:
        check(model, x, ["grad-flow", "nan-inf"], on_result=stop_after_first)
    partial = info.value.report
    assert [r.id for r in partial] == ["grad-flow"] and partial.interrupted
    assert "interrupted: 1 of 2 checks ran" in partial.to_text()
    assert json.loads(partial.to_json())["interrupted"] is True
    same(before, fingerprint(model))


def test_cli_prints_what_finished_when_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchwise.doctor import api

    src = tmp_path / "net.py"
    src.write_text("from torch import nn\nclass Net(nn.Linear):\n    def __init__(self):\n"
                   "        super().__init__(6, 3)\n")  # fmt: skip
    real = api._run_one

    def interrupt_second(check_id: str, *args: Any) -> Any:
        if check_id == "nan-inf":
            raise KeyboardInterrupt
        return real(check_id, *args)

    monkeypatch.setattr(api, "_run_one", interrupt_second)
    result = CliRunner().invoke(app, ["doctor", f"{src}:Net", "-i", "f32[8,6]", "--checks",
                                      "grad-flow,nan-inf"])  # fmt: skip
    assert result.exit_code == 130
    assert "grad-flow" in result.stdout and "interrupted: 1 of 2 checks ran" in result.stdout


def test_options_come_as_one_object_or_as_keywords() -> None:
    model, x = build(CLEAN[0])
    one = check(model, x, ["init-loss"], options=Options(loss="mse"))
    assert one.loss.startswith("mse_loss")
    with pytest.raises(TorchwiseError, match="unknown doctor option"):
        check(model, x, ["init-loss"], overfit_budget_s=3)


def test_doctor_help_lists_every_check_id() -> None:
    text = CliRunner().invoke(app, ["doctor", "--help"]).output
    assert all(check_id in text for check_id in CHECK_IDS)
