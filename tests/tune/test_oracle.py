"""The correctness oracle: correct knobs pass on models with BatchNorm, LayerNorm,
dropout and tied weights, in bf16 and fp16 with GradScaler; broken steps fail; every
threshold (the band's margin, its floor, the harm limit) has a case on each side."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import TinyCNN, TinyMLP, workload
from torch import nn

from torchwise.numerics import BF16, FP16, TF32, Band, Rounded, band, deviation, round_mantissa
from torchwise.tune.oracle import HARM, MARGIN, NoDropout, Oracle, harmful
from torchwise.tune.step import StepSettings, TrainingStep, Workload


class TiedLM(nn.Module):
    """Embedding tied to the output head, LayerNorm, dropout (module and attention's)."""

    def __init__(self, vocab: int = 32, dim: int = 16, p: float = 0.2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.drop = nn.Dropout(p)
        self.p = p
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.emb(ids))  # (B, T, C)
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        p = self.p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, T, C)
        return self.head(x + y)  # (B, T, vocab)


def models() -> dict[str, Workload]:
    torch.manual_seed(0)
    return {
        "batchnorm": workload(TinyCNN(), torch.randn(4, 3, 8, 8)),
        "layernorm+dropout": workload(TinyMLP(p=0.3), torch.randn(8, 16)),
        "tied+attention dropout": workload(TiedLM(), torch.randint(0, 32, (4, 8))),
    }


CORRECT = {
    "bf16 autocast": StepSettings(autocast="bf16"),
    "fp16 autocast + GradScaler": StepSettings(autocast="fp16", grad_scaler=True),
    "fused AdamW": StepSettings(optimizer_impl="fused"),
    "foreach AdamW": StepSettings(optimizer_impl="foreach"),
    "one thread": StepSettings(threads=1),
    "zero_grad in place": StepSettings(set_to_none=False),
    "checkpointing": StepSettings(checkpointing=True),
    "bf16 + fused": StepSettings(autocast="bf16", optimizer_impl="fused"),
}


@pytest.mark.parametrize("model", list(models()))
def test_correct_knobs_pass_in_train_mode_with_batch_statistics(model: str) -> None:
    wl = models()[model]
    oracle = Oracle(wl)
    assert oracle.train_mode, "dropout off must make these models deterministic in train mode"
    settings = dict(CORRECT)
    if model == "batchnorm":
        settings["channels_last"] = StepSettings(channels_last=True)
        settings["bf16 + channels_last"] = StepSettings(autocast="bf16", channels_last=True)
    for name, s in settings.items():
        result = oracle.judge(TrainingStep(wl, s))
        assert result.ok, (model, name, result.summary())
        assert result.mode.startswith("train mode (batch statistics")
        assert len(result.knob.train) == len(result.knob.eval) == result.steps == 3


class NoUpdate(TrainingStep):
    """A sabotaged knob: its optimizer never steps."""

    def optimizer_step(self) -> None:
        pass


class WrongLoss(TrainingStep):
    """A sabotaged knob: its forward computes something else."""

    def forward_loss(self, batch):  # type: ignore[no-untyped-def]
        return super().forward_loss(batch) * 1.5


class WrongDirection(TrainingStep):
    """A sabotaged knob: its gradients are scrambled before the update."""

    def optimizer_step(self) -> None:
        with torch.no_grad():
            for p in self.module.parameters():
                if p.grad is not None:
                    p.grad.copy_(p.grad.flip(0))
        super().optimizer_step()


class TwoSteps(TrainingStep):
    """A sabotaged knob: not the user's step (it updates twice per step, as a graph
    replayed after uncounted warm-up steps would have)."""

    def optimizer_step(self) -> None:
        super().optimizer_step()
        super().optimizer_step()


class NaN(TrainingStep):
    def forward_loss(self, batch):  # type: ignore[no-untyped-def]
        return super().forward_loss(batch) * float("nan")


@pytest.mark.parametrize(
    ("cls", "problem"),
    [
        (NoUpdate, "the step did not update the parameters"),
        (WrongLoss, "the losses differ"),
        (WrongDirection, "the losses differ"),
        (TwoSteps, "the losses differ"),
        (NaN, "non-finite"),
    ],
)
@pytest.mark.parametrize("model", list(models()))
def test_a_step_that_is_not_the_users_is_caught(model: str, cls: type, problem: str) -> None:
    wl = models()[model]
    result = Oracle(wl).judge(cls(wl))
    assert not result.ok and result.problem is not None
    assert result.problem.startswith(problem), result.summary()


def test_a_broken_bf16_step_is_caught_although_bf16_has_the_widest_band() -> None:
    wl = models()["layernorm+dropout"]
    result = Oracle(wl).judge(TwoSteps(wl, StepSettings(autocast="bf16")))
    assert not result.ok and result.ratio > MARGIN, result.summary()


class Overflows(nn.Module):
    """Large activations: at GradScaler's initial 2**16 its fp16 gradients overflow."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * 300.0  # (B, 4)


def test_gradscalers_skipped_first_steps_are_calibrated_away_not_called_incorrect() -> None:
    torch.manual_seed(0)
    wl = workload(Overflows(), torch.randn(8, 16) * 30)
    step = TrainingStep(wl, StepSettings(autocast="fp16", grad_scaler=True))
    result = Oracle(wl).judge(step)
    assert result.ok, result.summary()
    assert result.scaler is not None and "skipped step" in result.scaler
    assert step.scaler is not None and step.scaler.get_scale() < 2.0**16
    # Uncalibrated, the first step is skipped: its parameters do not move.
    raw = TrainingStep(wl, StepSettings(autocast="fp16", grad_scaler=True))
    before = [p.detach().clone() for p in raw.module.parameters()]
    raw.step()
    assert all(torch.equal(a, b) for a, b in zip(before, raw.module.parameters(), strict=True))


class Cancels(nn.Module):
    """The variance as E[x^2] - E[x]^2 of large, nearly equal terms: bf16 cannot resolve it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x) + 100.0  # (B, 8), around 100
        second = (h * h) @ torch.ones(8, 1) / 8  # (B, 1), matmuls: rounded in bf16
        first = h @ torch.ones(8, 1) / 8
        return second - first * first  # (B, 1), about 1 in fp32


def test_a_model_bf16_cannot_train_is_incorrect_under_bf16_even_inside_the_band() -> None:
    torch.manual_seed(0)
    wl = workload(Cancels(), torch.randn(8, 8), loss="mse")
    oracle = Oracle(wl)
    result = oracle.judge(TrainingStep(wl, StepSettings(autocast="bf16")))
    assert not result.ok and "bf16 moves this model's losses" in (result.problem or "")
    # fp32 knobs on the same model are fine: the harm is bf16's
    assert oracle.judge(TrainingStep(wl, StepSettings(optimizer_impl="foreach"))).ok
    # A knob added on top of an accepted bf16 is not judged again for bf16's harm.
    on_top = TrainingStep(wl, StepSettings(autocast="bf16", optimizer_impl="foreach"))
    assert "bf16 moves" not in (oracle.judge(on_top, precision_accepted=True).problem or "")


def test_harm_is_calibrated_against_fp32s_own_noise() -> None:
    baseline = [13.3, 11.9, 9.89]
    # bf16 moved the losses by 12%: harmful where fp32 reordered moves them by 0.1% ...
    assert harmful(1.18, baseline, [13.3, 11.89, 9.88])
    # ... not where fp32 alone moves them by 6% (a chaotic trajectory, GPT-2 on an H200)
    assert not harmful(1.18, baseline, [13.3, 11.5, 10.51])
    # and never below 5% of the losses' size
    assert not harmful(0.4, baseline, baseline)


class RandomByHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            x = x * (torch.rand_like(x) > 0.1)  # stochastic depth-like noise, not nn.Dropout
        return self.fc(x)


def test_a_model_random_beyond_dropout_is_judged_in_eval_mode_and_says_so() -> None:
    torch.manual_seed(0)
    wl = workload(RandomByHand(), torch.randn(8, 16))
    oracle = Oracle(wl)
    assert not oracle.train_mode
    result = oracle.judge(TrainingStep(wl, StepSettings(optimizer_impl="foreach")))
    assert result.ok and result.mode.startswith("eval mode")


def test_dropout_is_restored_after_the_check() -> None:
    wl = models()["tied+attention dropout"]
    step = TrainingStep(wl, StepSettings(optimizer_impl="foreach"))
    Oracle(wl).judge(step)
    drops = [m for m in step.module.modules() if isinstance(m, nn.Dropout)]
    assert drops and all(m.p == 0.2 for m in drops)


def test_no_dropout_mode_neutralises_functional_and_attention_dropout() -> None:
    x = torch.ones(2, 4, 8)
    with NoDropout():
        assert torch.equal(F.dropout(x, 0.9, training=True), x)
        a = F.scaled_dot_product_attention(x, x, x, None, 0.9)
        b = F.scaled_dot_product_attention(x, x, x, dropout_p=0.9)
    assert torch.equal(a, F.scaled_dot_product_attention(x, x, x)) and torch.equal(a, b)


# -- numerics: the emulation and the band ---------------------------------------------


def test_round_mantissa_matches_the_hardware_conversion() -> None:
    x = torch.randn(10000) * torch.logspace(-20, 20, 10000)
    assert torch.equal(round_mantissa(x, BF16.mantissa_bits), x.to(torch.bfloat16).float())
    normal = x[(x.abs() > 1e-4) & (x.abs() < 6e4)]  # fp16's normal range
    assert torch.equal(round_mantissa(normal, FP16.mantissa_bits), normal.half().float())
    assert math.isinf(float(round_mantissa(torch.tensor([math.inf]), 7)))


def test_rounded_mode_rounds_products_not_elementwise_ops() -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with Rounded(BF16):
        product, total = a @ b, a + b
    expected = (a.bfloat16().float() @ b.bfloat16().float()).bfloat16().float()
    assert torch.equal(product, expected) and torch.equal(total, a + b)
    with Rounded(TF32):  # inputs only: the product is accumulated in fp32
        tf32 = a @ b
    assert torch.equal(tf32, round_mantissa(a, 10) @ round_mantissa(b, 10))


def test_the_band_is_the_margin_times_the_twins_plus_a_float32_floor() -> None:
    reference = [2.0, 1.5, 1.2]
    twins = [[2.0, 1.501, 1.2], [2.0, 1.5, 1.2004]]
    limits = band(reference, twins, margin=MARGIN)
    assert limits.noise == pytest.approx(0.001)
    floor = 64 * 2.0**-23 * 2.0
    assert limits.floor == pytest.approx(floor)
    assert limits.admits(MARGIN * 0.001 + floor * 0.99)
    assert not limits.admits(MARGIN * 0.001 + floor * 1.01)
    # twins that agree exactly still leave fp32's resolution
    assert band(reference, [reference], margin=MARGIN).admits(floor * 0.5)
    assert deviation([1.0, math.nan], [1.0, 2.0]) == math.inf
    assert Band(0.0, MARGIN, 0.0).limit == 0.0


def test_the_harm_limit_is_doctors_loss_warning() -> None:
    assert HARM == 0.05


class BNBlocks(nn.Module):
    """Repeated blocks with BatchNorm: checkpointing recomputes their forward."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU()) for _ in range(2)
        )
        self.out = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def test_checkpointed_batchnorm_updates_its_running_statistics_twice_and_is_told() -> None:
    torch.manual_seed(0)
    wl = workload(BNBlocks(), torch.randn(8, 8))
    result = Oracle(wl).judge(TrainingStep(wl, StepSettings(checkpointing=True)))
    assert not result.ok and "in eval mode only" in (result.problem or ""), result.summary()
