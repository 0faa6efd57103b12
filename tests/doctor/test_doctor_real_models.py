"""doctor on real third-party architectures: no false alarm on healthy ones, planted bugs caught.

The cases live in doctor_real_cases.py (transformers and diffusers models built through
``hf:`` targets at test size, torch's LSTM and TransformerEncoder, and
reproductions of the nanoGPT, minGPT and timm zero-init patterns).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytest.importorskip("transformers")
pytest.importorskip("diffusers")

sys.path.insert(0, str(Path(__file__).parent))
from doctor_real_cases import HEALTHY, PLANTED, Case, build, tokens
from patterns import GPT, GPTConfig, TransformerLM, ZeroInitResNet

from torchwise.doctor import Status, check
from torchwise.errors import TorchwiseError


def _param(cases: list[Case]) -> list[object]:
    return [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else []) for c in cases]


def test_the_suite_covers_a_dozen_real_architectures() -> None:
    third_party = [c for c in HEALTHY if not c.source.endswith("(reproduction)")]
    assert len(third_party) >= 12
    assert {c.check for c in PLANTED} >= {
        "causal-leak", "batch-independence", "grad-flow", "param-update", "eval-determinism",
        "train-eval-gap", "init-loss", "overfit-batch", "nan-inf", "dead-units", "determinism",
        "amp-drift", "device-consistency", "exportable",
    }  # fmt: skip


@pytest.mark.parametrize("case", _param(HEALTHY))
def test_healthy_real_model_raises_no_alarm(case: Case) -> None:
    model, args, kwargs, options = build(case)
    report = check(model, args, kwargs=kwargs, name=case.name, **options)
    alarms = report.failed + report.warned
    flagged = [(r.id, r.status.value, r.summary) for r in alarms]
    assert flagged == []


@pytest.mark.parametrize("case", _param(PLANTED))
def test_planted_bug_is_caught(case: Case) -> None:
    model, args, kwargs, options = build(case)
    result = check(model, args, [case.check], kwargs=kwargs, **options)[case.check]
    assert result.status in (Status.FAIL, Status.WARN), result.summary
    assert result.causes and result.fix


def test_zero_initialised_gates_are_recognised_not_flagged() -> None:
    model = ZeroInitResNet()
    report = check(model, torch.randn(2, 3, 16, 16), ["grad-flow", "param-update"])
    behind = report["grad-flow"].evidence["zero_at_init_behind_a_zero_gate"]
    assert "layers.0.conv1.weight" in behind and "layers.0.bn2.weight" not in behind
    assert report["grad-flow"].evidence["zero_initialised_gates"] == [
        "layers.0.bn2.weight",
        "layers.1.bn2.weight",
    ]
    assert (
        "layers.0.conv1.weight" in report["param-update"].evidence["changed_from_the_second_step"]
    )
    assert report.ok and not report.warned


def test_hf_models_run_without_cache_and_with_their_own_loss() -> None:
    case = next(c for c in HEALTHY if c.name == "gpt2")
    model, args, kwargs, options = build(case)
    report = check(model, args, ["init-loss"], kwargs=kwargs, **options)
    assert report.loss.startswith("the model's own loss: forward(labels=...)")
    assert any("use_cache=False" in note for note in report.notes)


def test_nanogpt_style_model_is_trained_with_its_own_loss() -> None:
    torch.manual_seed(0)
    report = check(GPT(GPTConfig()), tokens(2, 8), ["overfit-batch"], causal_dim=1)
    assert report.loss.startswith("the model's own loss: forward(targets=...)")
    assert report["overfit-batch"].status is Status.PASS


def test_randomness_in_eval_is_not_mistaken_for_a_leak() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig())
    model.transformer.h[0].register_forward_hook(lambda m, a, out: F.dropout(out, 0.2))
    report = check(model, tokens(2, 8), ["eval-determinism", "batch-independence", "causal-leak"],
                   causal_dim=1)  # fmt: skip
    assert report["eval-determinism"].status is Status.FAIL  # the real finding
    assert report["batch-independence"].status is Status.PASS
    assert report["causal-leak"].status is Status.PASS


def test_time_first_models_use_the_batch_dim() -> None:
    torch.manual_seed(0)
    model, x = TransformerLM(), tokens(8, 2, high=50)
    assert check(model, x, ["batch-independence"], batch_dim=1).ok
    # treating time as the batch would be a false leak: the mask mixes positions
    wrong = check(model, x, ["batch-independence"], batch_dim=0)["batch-independence"]
    assert wrong.status is Status.FAIL and "--batch-dim" in " ".join(wrong.causes)


def test_export_failing_inside_a_library_is_not_blamed_on_the_user() -> None:
    torch.manual_seed(0)
    x = tokens(8, 2, high=50)
    by_default = check(TransformerLM(), x, batch_dim=1, causal_dim=0)["exportable"]
    assert by_default.status is Status.SKIP
    assert "inside library code at torch/nn/modules/transformer.py" in by_default.summary
    assert "patterns.py" in by_default.summary  # where the user's code called it
    asked = check(TransformerLM(), x, ["exportable"], batch_dim=1)["exportable"]
    assert asked.status is Status.WARN and asked.summary.startswith("requested, but it cannot run")


def test_cpu_tensor_made_in_forward_is_caught_at_its_line() -> None:
    class ArangeOnCPU(GPT):
        def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
            pos = torch.arange(idx.size(1))  # no device=: stays on the CPU
            return self.lm_head(self.transformer.wte(idx) + self.transformer.wpe(pos))

    torch.manual_seed(0)
    result = check(ArangeOnCPU(GPTConfig()), tokens(2, 8), ["device-consistency"])
    found = result["device-consistency"]
    assert found.status is Status.FAIL
    assert "transformer.wpe" in found.where and "aten.embedding" in found.summary
    assert "test_doctor_real_models.py:" in found.summary


def test_requested_check_that_cannot_run_warns_with_the_reason() -> None:
    model = nn.Linear(4, 3)
    report = check(model, torch.randn(1, 4), ["batch-independence", "causal-leak"], causal_dim=1)
    assert report["batch-independence"].status is Status.WARN
    assert "needs a batch of at least 2" in report["batch-independence"].summary
    assert report["causal-leak"].status is Status.WARN
    assert "no dim 1 of the input's length" in report["causal-leak"].summary


def test_a_library_model_that_raises_is_located_in_the_library() -> None:
    case = next(c for c in HEALTHY if c.name == "gpt2")
    model, _, _, _ = build(case)
    with pytest.raises(TorchwiseError) as info:
        check(model, {"input_ids": torch.randn(2, 8)}, ["grad-flow"])
    message = str(info.value)
    assert message.startswith("forward of GPT2LMHeadModel raised in transformer.wte (Embedding)")
    assert "transformers/models/gpt2/modeling_gpt2.py:" in message
