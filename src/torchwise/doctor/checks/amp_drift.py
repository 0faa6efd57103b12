"""amp-drift: one training step under bfloat16 autocast agrees with float32.

On CUDA the step runs under real autocast (bf16 where supported, else fp16). On
the CPU, bf16 autocast is *emulated*, so the verdict is the same on every CPU,
with native bf16 or without: the inputs and outputs of the ops autocast runs in
low precision (matrix products, convolutions, attention; forward and backward)
are rounded to bfloat16, everything else stays float32. That is the rounding
that matters (bf16 keeps 8 significant bits, ~0.4% per value) and a little
kinder than real autocast, which also keeps elementwise ops in bf16.

Judged on the output and the loss. The gradient cosine is reported but not
judged: deep nets at initialisation have gradients so sensitive that rounding
alone turns them (MobileNetV2 at init: ~0.4) while their outputs agree.
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

aten = torch.ops.aten

#: The aten ops CPU autocast runs in bfloat16 (its "lower precision" list, as the
#: ops appear under the dispatcher), and their backward ops.
LOW_PRECISION_OPS = {
    aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
    aten.addbmm.default, aten.convolution.default, aten.convolution_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
}  # fmt: skip

OUTPUT_WARN, OUTPUT_FAIL = 0.15, 0.5  # relative L2 error of the primary output
LOSS_WARN, LOSS_FAIL = 0.05, 0.2  # relative error of the loss
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


def _mode(ctx: Context) -> tuple[str, torch.dtype | None]:
    if ctx.device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return "bf16 autocast on CUDA", torch.bfloat16
        return "fp16 autocast on CUDA", torch.float16
    if ctx.device.type == "cpu":
        return "emulated bf16 autocast on the CPU", None
    return f"autocast on {ctx.device.type}", None


def _step(ctx: Context, dtype: torch.dtype | None, low: bool, record: bool) -> StepResult:
    ctx.reseed()  # the same dropout masks in both runs
    ctx.zero_grads()
    trace = Trace()
    with recording(ctx.model) if record else contextlib.nullcontext(trace) as trace:
        if not low:
            out, loss = ctx.train_loss()
            if loss.requires_grad:
                backward(loss)
        elif dtype is None:
            with EmulatedBf16():  # type: ignore[no-untyped-call]
                out, loss = ctx.train_loss()
                if loss.requires_grad:
                    backward(loss)
        else:
            with torch.autocast(ctx.device.type, dtype=dtype):
                out, loss = ctx.train_loss()
            if loss.requires_grad:
                backward(loss)
    grads = [
        None if p.grad is None else p.grad.detach().float().clone() for _, p in ctx.trainable()
    ]
    output = primary_output(out).detach().float()
    return StepResult(float(loss.detach().float()), output, grads, trace)


def _errors(hi: StepResult, lo: StepResult) -> tuple[float, float]:
    """(relative error of the output, of the loss) of the low-precision step."""
    return _rel(lo.output, hi.output), abs(lo.loss - hi.loss) / max(abs(hi.loss), 1e-8)


def _within(hi: StepResult, lo: StepResult, *, warn: bool) -> bool:
    """Whether the drift stays under the warning (or the failure) thresholds."""
    out_rel, loss_rel = _errors(hi, lo)
    if warn:
        return out_rel <= OUTPUT_WARN and loss_rel <= LOSS_WARN
    return math.isfinite(lo.loss) and out_rel <= OUTPUT_FAIL and loss_rel <= LOSS_FAIL


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return math.inf
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12))


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
    cost = "2 fwd+bwd"

    def measure(self, run: Run) -> AmpM | Verdict:
        ctx = run.ctx
        how, dtype = _mode(ctx)
        if ctx.device.type not in ("cpu", "cuda"):
            return Verdict.cannot_run(f"autocast is not checked on {ctx.device.type}")
        m = AmpM(how, _step(ctx, dtype, False, False), names=[n for n, _ in ctx.trainable()])
        try:
            m.low = _step(ctx, dtype, True, False)
        except Exception as exc:
            m.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            return m
        if not _within(m.fp32, m.low, warn=True):
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
        out_rel, loss_rel = _errors(hi, lo)
        pairs = [(n, a, b) for n, a, b in zip(m.names, hi.grads, lo.grads, strict=True)
                 if a is not None and b is not None]  # fmt: skip
        evidence: dict[str, Any] = {
            "mode": m.mode,
            "loss_fp32": hi.loss,
            "loss_low_precision": lo.loss,
            "loss_rel_error": loss_rel,
            "output_rel_error": out_rel,
            "grad_cosine": _cos([a for _, a, _ in pairs], [b for _, _, b in pairs]),
        }
        thresholds = (
            f"warns above {OUTPUT_WARN:g} output / {LOSS_WARN:g} loss error, fails above "
            f"{OUTPUT_FAIL:g} / {LOSS_FAIL:g}; the gradient cosine is not judged"
        )
        if not _within(hi, lo, warn=False):
            status = Status.FAIL
        elif not _within(hi, lo, warn=True):
            status = Status.WARN
        else:
            return Verdict(
                Status.PASS,
                f"{m.mode} vs float32: output rel. error {out_rel:.2g}, loss {loss_rel:.2g} "
                f"({thresholds}: {evidence['grad_cosine']:.3f})",
                evidence=evidence,
            )
        where, cause = _where_it_drifts(hi.trace, lo.trace)
        if cause:
            evidence["drift_starts"] = cause
        return Verdict(
            status,
            f"{m.mode} drifts from float32: output rel. error {out_rel:.2g}, loss {loss_rel:.2g} "
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


def _where_it_drifts(hi: Trace, lo: Trace) -> tuple[str | None, str | None]:
    """The module that amplifies the rounding error most (its inputs were still close)."""
    best: tuple[float, str, float, float] | None = None
    for a, b in zip(hi.records, lo.records, strict=False):
        if a.name != b.name or not a.outputs or len(a.outputs) != len(b.outputs):
            continue
        out_err = max(_rel(y, x) for x, y in zip(a.outputs, b.outputs, strict=True))
        in_err = max((_rel(y, x) for x, y in zip(a.inputs, b.inputs, strict=False)), default=0.0)
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
