"""amp-drift: one training step under low-precision autocast agrees with float32.

On CUDA the step runs under real autocast (bf16 where supported, else fp16). On
the CPU, bf16 autocast is *emulated*, so the verdict is the same on every CPU,
with native bf16 or without: the inputs and outputs of the ops autocast runs in
low precision (matrix products, convolutions, attention; forward and backward)
are rounded to bfloat16, everything else stays float32. That is the rounding
that matters (bf16 keeps 8 significant bits, ~0.4% per value) and a little
kinder than real autocast, which also keeps elementwise ops in bf16.

Both steps run with regularisation off (every module in eval mode but BatchNorm),
so dropout masks, layer drop and training-only masking cannot pass for drift.

Calibrated, not absolute. A deep network at initialisation can move its near-zero
logits by 20% under any rounding at all, and that is not autocast's fault. So
doctor also runs the float32 forward with the weights and inputs rounded to the
low-precision dtype once (the *reference*: the model's own sensitivity to that
rounding) and judges the *amplification*: how many times the autocast error
exceeds the reference's (:func:`torchwise.numerics.amplification`). Healthy
models, from MLPs to Whisper and Mamba, stay within 1-3x; a difference of large,
nearly equal terms (``|a|^2 + |b|^2 - 2ab``) is in the tens or hundreds. A flagged
drift must also matter for the output: the predicted class distribution moves
(total variation) for classifiers, the output moves relative to its own spread
otherwise, or the loss moves. The gradient cosine is reported, not judged.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import Context, backward, primary_output
from torchwise.doctor.report import Status
from torchwise.doctor.trace import Trace, recording
from torchwise.numerics import amplification, relative_error, rounded, spread_error
from torchwise.tensortree import map_tensors

aten = torch.ops.aten

#: The aten ops CPU autocast runs in bfloat16 (its "lower precision" list, as the
#: ops appear under the dispatcher), and their backward ops.
LOW_PRECISION_OPS = {
    aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
    aten.addbmm.default, aten.convolution.default, aten.convolution_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
}  # fmt: skip

#: the autocast error, in multiples of the reference rounding's error, that warns / fails
AMPLIFY_WARN, AMPLIFY_FAIL = 8.0, 32.0
#: ... when the output moves this much (total variation of the predicted distribution for
#: classifiers, else the error relative to the output's spread) ...
EFFECT_WARN, EFFECT_FAIL = 0.02, 0.1
#: ... or the loss moves this much (relative), as tune's bf16 tolerance on losses
LOSS_WARN, LOSS_FAIL = 0.05, 0.2
LOCAL_DRIFT = 0.05  # a module's output error that counts as drift when naming where


def _to_bf16(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
        return value.to(torch.bfloat16).to(torch.float32)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_bf16(v) for v in value)
    return value


class EmulatedBf16(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Round the float32 inputs and outputs of autocast's bf16 ops to bfloat16."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func not in LOW_PRECISION_OPS:
            return func(*args, **(kwargs or {}))
        return _to_bf16(func(*_to_bf16(args), **(kwargs or {})))


@dataclass
class StepResult:
    loss: float
    output: torch.Tensor
    grads: list[torch.Tensor | None]
    trace: Trace


@dataclass
class AmpM:
    mode: str
    fp32: StepResult
    low: StepResult | None = None
    names: list[str] = field(default_factory=list)
    error: str | None = None
    #: the float32 forward on weights and inputs rounded to the low dtype once
    reference: StepResult | None = None
    #: class dim of the output when the loss is cross-entropy (None: not a classifier)
    class_dim: int | None = None
    dtype: str = "bfloat16"


def _mode(ctx: Context) -> tuple[str, torch.dtype | None, torch.dtype]:
    """(what is run, the autocast dtype or None for the CPU emulation, the low dtype)."""
    if ctx.device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return "bf16 autocast on CUDA", torch.bfloat16, torch.bfloat16
        return "fp16 autocast on CUDA", torch.float16, torch.float16
    if ctx.device.type == "cpu":
        return "emulated bf16 autocast on the CPU", None, torch.bfloat16
    return f"autocast on {ctx.device.type}", None, torch.bfloat16


def _precision(dtype: torch.dtype | None, low: bool, device: torch.device) -> Any:
    """float32 (nothing), the CPU emulation of bf16 autocast, or real autocast."""
    if not low:
        return contextlib.nullcontext()
    if dtype is None:
        return EmulatedBf16()  # type: ignore[no-untyped-call]
    return torch.autocast(device.type, dtype=dtype)


def _step(ctx: Context, dtype: torch.dtype | None, low: bool, record: bool) -> StepResult:
    ctx.reseed()
    ctx.zero_grads()
    ctx.quiet_train_mode()  # no dropout, layer drop or training-only masking
    args, kwargs = ctx.fresh_inputs()
    trace = Trace()
    emulated = low and dtype is None  # the emulation rounds the backward's products too
    with (
        recording(ctx.model) if record else contextlib.nullcontext(trace) as trace,
        torch.enable_grad(),
    ):
        with _precision(dtype, low, ctx.device):
            out = ctx.model(*args, **kwargs)
            loss = ctx.loss_of(out)
            if emulated and loss.requires_grad:
                backward(loss)
        if not emulated and loss.requires_grad:
            backward(loss)
    grads = [
        None if p.grad is None else p.grad.detach().float().clone() for _, p in ctx.trainable()
    ]
    output = primary_output(out).detach().float()
    return StepResult(float(loss.detach().float()), output, grads, trace)


def _reference(ctx: Context, low: torch.dtype) -> StepResult:
    """The float32 forward with every floating-point weight, buffer and input rounded to
    ``low`` once: the error any low-precision copy of this model has, before autocast."""
    ctx.reseed()
    ctx.quiet_train_mode()
    args, kwargs = map_tensors(
        ctx.fresh_inputs(), lambda t: rounded(t, low) if t.is_floating_point() else t
    )
    tensors = [t for t in [*ctx.model.parameters(), *ctx.model.buffers()] if t.is_floating_point()]
    saved = [t.detach().clone() for t in tensors]
    try:
        with torch.no_grad():
            for tensor in tensors:
                tensor.copy_(rounded(tensor, low))
            out = ctx.model(*args, **kwargs)
            loss = ctx.loss_of(out)
    finally:
        with torch.no_grad():
            for tensor, value in zip(tensors, saved, strict=True):
                tensor.copy_(value)
    return StepResult(float(loss.float()), primary_output(out).detach().float(), [], Trace())


@dataclass(frozen=True)
class Drift:
    """How far one run is from float32: the calibrated and the absolute measures."""

    output: float  # error relative to the output's spread
    effect: float  # what a reader of the output sees move (see _effect)
    loss: float  # relative error of the loss

    @classmethod
    def between(cls, hi: StepResult, lo: StepResult, class_dim: int | None) -> Drift:
        loss = abs(lo.loss - hi.loss) / max(abs(hi.loss), 1e-8)
        if not math.isfinite(lo.loss):
            loss = math.inf
        output = spread_error(lo.output, hi.output)
        return cls(output, _effect(hi.output, lo.output, class_dim, output), loss)


def _effect(hi: torch.Tensor, lo: torch.Tensor, class_dim: int | None, spread: float) -> float:
    """For class logits, the mean total variation between the predicted distributions;
    otherwise the error relative to the output's spread."""
    if class_dim is None or hi.shape != lo.shape or hi.ndim == 0:
        return spread
    p = hi.double().movedim(class_dim, -1).softmax(-1)
    q = lo.double().movedim(class_dim, -1).softmax(-1)
    tv = 0.5 * (p - q).abs().sum(-1).mean()
    return float(tv) if bool(torch.isfinite(tv)) else math.inf


def _cos(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    # Accumulate tensor by tensor in float64: one float32 dot product over 100M+
    # gradient entries drifts by percent and gave cosines above 1 on GPT-2.
    dot = xx = yy = 0.0
    for left, right in zip(a, b, strict=True):
        x, y = left.detach().double().flatten(), right.detach().double().flatten()
        dot, xx, yy = dot + float(x @ y), xx + float(x @ x), yy + float(y @ y)
    denom = (xx * yy) ** 0.5
    return max(-1.0, min(1.0, dot / denom)) if denom > 0 else 1.0


class AmpDrift(Check[AmpM]):
    cost = "2 fwd+bwd and 1 fwd (the reference rounding)"

    def measure(self, run: Run) -> AmpM | Verdict:
        ctx = run.ctx
        how, dtype, low = _mode(ctx)
        if ctx.device.type not in ("cpu", "cuda"):
            return Verdict.cannot_run(f"autocast is not checked on {ctx.device.type}")
        class_dim = ctx.loss.class_dim if ctx.loss.kind == "ce" else None
        m = AmpM(how, _step(ctx, dtype, False, False), names=[n for n, _ in ctx.trainable()],
                 class_dim=class_dim, dtype=str(low).removeprefix("torch."))  # fmt: skip
        try:
            m.low = _step(ctx, dtype, True, False)
        except Exception as exc:
            m.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            return m
        m.reference = _reference(ctx, low)
        if _judged(m) is not Status.PASS:
            # it drifts: both steps again, recorded module by module, to say where
            m.fp32, m.low = _step(ctx, dtype, False, True), _step(ctx, dtype, True, True)
        return m

    def judge(self, m: AmpM) -> Verdict:
        if m.low is None:
            return Verdict(
                Status.FAIL,
                f"forward fails under {m.mode}: {m.error}",
                causes=["explicit .float()/.half() casts that mix dtypes inside forward"],
                fix="let autocast pick dtypes; do not cast activations by hand",
            )
        hi, lo = m.fp32, m.low
        amp = Drift.between(hi, lo, m.class_dim)
        ref = Drift.between(hi, m.reference, m.class_dim) if m.reference else None
        gain = _gain(amp, ref, m.dtype)
        pairs = [(n, a, b) for n, a, b in zip(m.names, hi.grads, lo.grads, strict=True)
                 if a is not None and b is not None]  # fmt: skip
        evidence: dict[str, Any] = {
            "mode": m.mode,
            "loss_fp32": hi.loss,
            "loss_low_precision": lo.loss,
            "loss_rel_error": amp.loss,
            "output_error_vs_spread": amp.output,
            "prediction_change" if m.class_dim is not None else "output_change": amp.effect,
            "reference_output_error": ref.output if ref else None,
            "amplification": gain,
            "grad_cosine": _cos([a for _, a, _ in pairs], [b for _, _, b in pairs]),
        }
        thresholds = (
            f"warns when the autocast error is over {AMPLIFY_WARN:g}x the error of rounding "
            f"weights and inputs to {m.dtype} once and the output moves over {EFFECT_WARN:g} "
            f"(or the loss over {LOSS_WARN:g}); fails over {AMPLIFY_FAIL:g}x and "
            f"{EFFECT_FAIL:g} ({LOSS_FAIL:g})"
        )
        status = _judged(m)
        if status is Status.PASS:
            return Verdict(
                Status.PASS,
                f"{m.mode} vs float32: error {gain:.2g}x that of rounding the weights and "
                f"inputs once, output change {amp.effect:.2g}, loss {amp.loss:.2g} "
                f"({thresholds}; the gradient cosine, {evidence['grad_cosine']:.3f}, is not "
                "judged)",
                evidence=evidence,
            )
        where, cause = _where_it_drifts(hi.trace, lo.trace)
        if cause:
            evidence["drift_starts"] = cause
        return Verdict(
            status,
            f"{m.mode} drifts from float32: its error is {gain:.3g}x that of rounding the "
            f"weights and inputs once, output change {amp.effect:.2g}, loss {amp.loss:.2g} "
            f"({thresholds})",
            evidence=evidence,
            where=[where] if where else [],
            causes=[
                cause
                or "a difference of large, nearly equal terms (|a|^2 + |b|^2 - 2ab, "
                "E[x^2] - E[x]^2, a hand-written log-sum-exp): bf16 keeps ~3 significant digits"
            ],
            fix="compute the sensitive expression in float32 (with torch.autocast(..., "
            "enabled=False) and .float()), use the fused op (torch.cdist, torch.var, "
            "torch.logsumexp), or keep this model in float32",
        )


def _gain(amp: Drift, ref: Drift | None, dtype: str) -> float:
    """The autocast error in multiples of the reference rounding's (output and loss)."""
    if not math.isfinite(amp.loss) or not math.isfinite(amp.output):
        return math.inf
    reference = ref.output if ref is not None else 0.0
    reference_loss = ref.loss if ref is not None else 0.0
    return max(
        amplification(amp.output, reference, dtype),
        amplification(amp.loss, reference_loss, dtype) if amp.loss >= LOSS_WARN else 0.0,
    )


def _judged(m: AmpM) -> Status:
    """The verdict from the numbers (shared by measure, to decide on recording, and judge)."""
    if m.low is None:
        return Status.FAIL
    amp = Drift.between(m.fp32, m.low, m.class_dim)
    ref = Drift.between(m.fp32, m.reference, m.class_dim) if m.reference else None
    gain = _gain(amp, ref, m.dtype)
    if gain >= AMPLIFY_FAIL and (amp.effect >= EFFECT_FAIL or amp.loss >= LOSS_FAIL):
        return Status.FAIL
    if gain >= AMPLIFY_WARN and (amp.effect >= EFFECT_WARN or amp.loss >= LOSS_WARN):
        return Status.WARN
    return Status.PASS


def _where_it_drifts(hi: Trace, lo: Trace) -> tuple[str | None, str | None]:
    """The module that amplifies the rounding error most (its inputs were still close)."""
    best: tuple[float, str, float, float] | None = None
    for a, b in zip(hi.records, lo.records, strict=False):
        if a.name != b.name or not a.outputs or len(a.outputs) != len(b.outputs):
            continue
        out_err = max(relative_error(y, x) for x, y in zip(a.outputs, b.outputs, strict=True))
        in_err = max(
            (relative_error(y, x) for x, y in zip(a.inputs, b.inputs, strict=False)), default=0.0
        )
        if out_err < LOCAL_DRIFT:
            continue
        gain = out_err / max(in_err, 2**-8)
        if best is None or gain > best[0]:
            best = (gain, a.name, in_err, out_err)
    if best is None:
        return None, None
    _, name, in_err, out_err = best
    return name, (
        f"`{name}` turns a {in_err:.2g} relative error in its inputs into {out_err:.2g} in its "
        "output: it computes a difference of large, nearly equal terms, which bf16's 8 "
        "significant bits cannot resolve"
    )
