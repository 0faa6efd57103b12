"""Numerical checks: nan-inf, dead-units, amp-drift."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from torchwise.doctor.context import Context, backward, primary_output, tensors_in
from torchwise.doctor.registry import register, result
from torchwise.doctor.report import CheckResult, Status
from torchwise.doctor.trace import first_nonfinite, recording


def _finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())


@register("nan-inf", title="output, loss and gradients are finite", cost="1 fwd+bwd")
def nan_inf(ctx: Context) -> CheckResult:
    bad_params = [n for n, p in ctx.model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad_params:
        return result(
            "nan-inf",
            Status.FAIL,
            f"{len(bad_params)} parameters already hold NaN/inf before any forward",
            where=bad_params,
            causes=["a broken custom init (e.g. division by a zero fan-in)", "a bad checkpoint"],
            fix="re-initialize or reload these parameters",
        )
    ctx.zero_grads()
    with recording(ctx.model) as trace:
        out, loss = ctx.train_loss()
    outputs = tensors_in(out)
    evidence: dict[str, Any] = {"output_finite": _finite(outputs), "loss": float(loss.detach())}
    if not evidence["output_finite"]:
        blame = first_nonfinite(trace)
        if blame:
            evidence["first_non_finite"] = blame[1]
        return result(
            "nan-inf",
            Status.FAIL,
            "the forward output contains NaN or inf",
            evidence=evidence,
            where=[blame[0]] if blame else [],
            causes=[
                "log/sqrt/pow of a negative or zero value (log of an un-clamped input)",
                "division by a value that can be zero (a std or norm without eps)",
                "exp of a large value overflowing (a hand-written softmax without the max "
                "subtraction)",
            ],
            fix="clamp before log/sqrt (x.clamp_min(eps)), add eps to denominators, use "
            "torch.logsumexp / F.log_softmax instead of hand-written versions",
        )
    if not math.isfinite(evidence["loss"]):
        return result(
            "nan-inf",
            Status.FAIL,
            "the output is finite but the loss is not",
            evidence=evidence,
            causes=["labels outside the valid range", "log(0) in a hand-written loss"],
            fix="compute the loss from logits with the fused torch losses",
        )
    if loss.requires_grad:
        backward(loss)
    bad_grads = [
        n
        for n, p in ctx.model.named_parameters()
        if p.grad is not None and not bool(torch.isfinite(p.grad).all())
    ]
    evidence["params_with_non_finite_grad"] = len(bad_grads)
    if bad_grads:
        return result(
            "nan-inf",
            Status.FAIL,
            f"forward and loss are finite but {len(bad_grads)} gradients are NaN/inf",
            evidence=evidence,
            where=bad_grads,
            causes=[
                "the derivative is infinite at the point: sqrt(0), norm of a zero vector, "
                "pow(x, p<1) at 0, acos/asin at +-1",
            ],
            fix="add eps inside the sqrt/norm (torch.sqrt(x + eps)) or clamp the argument",
        )
    return result(
        "nan-inf", Status.PASS, "output, loss and gradients are all finite", evidence=evidence
    )


_RELU_OPS = {"relu", "relu_", "hardtanh", "hardtanh_", "threshold", "threshold_"}


class _ReluWatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Counts, per ReLU-family call, the share of units never active on the batch."""

    def __init__(self, stack: list[str]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.stack = stack
        self.calls: dict[str, tuple[int, int]] = {}  # label -> (dead units, units)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func._overloadpacket.__name__
        if name.startswith("hardtanh") and len(args) > 1 and float(args[1]) != 0.0:
            return out  # hardtanh(-1, 1) is not ReLU-like; ReLU6 is hardtanh(0, 6)
        if name in _RELU_OPS and isinstance(out, torch.Tensor) and out.ndim >= 2:
            # units: channels (dim 1) for (B, C, ...) images, the last dim for (B, F) and
            # (B, T, F) sequences
            unit_dim = 1 if out.ndim != 3 else out.ndim - 1
            active = (out > 0).movedim(unit_dim, 0).reshape(out.shape[unit_dim], -1).any(1)
            label = self.stack[-1] if self.stack else "forward"
            n = 2
            while label in self.calls:
                label = f"{self.stack[-1] if self.stack else 'forward'} (call {n})"
                n += 1
            self.calls[label] = (int((~active).sum()), active.numel())
        return out


@register("dead-units", title="share of ReLU units never active, per layer", cost="1 fwd")
def dead_units(ctx: Context) -> CheckResult:
    stack: list[str] = []
    handles = []
    for name, module in ctx.model.named_modules():
        label = name or type(module).__name__

        def push(mod: nn.Module, args: object, label: str = label) -> None:
            stack.append(label)

        def pop(mod: nn.Module, args: object, out: object) -> None:
            if stack:
                stack.pop()

        handles.append(module.register_forward_pre_hook(push))
        handles.append(module.register_forward_hook(pop, always_call=True))
    watch = _ReluWatch(stack)
    try:
        with torch.no_grad(), watch:
            ctx.forward(train=True)
    finally:
        for h in handles:
            h.remove()
    if not watch.calls:
        return result("dead-units", Status.SKIP, "no ReLU-family activation ran in forward")
    shares = {k: dead / units for k, (dead, units) in watch.calls.items()}
    worst = max(shares, key=shares.__getitem__)
    evidence: dict[str, Any] = {
        "relu_calls": len(shares),
        "worst_layer": worst,
        "worst_dead_share": shares[worst],
        "units_in_worst": watch.calls[worst][1],
        "batch": ctx.batch_size,
    }
    flagged = sorted((k for k, v in shares.items() if v >= 0.5), key=lambda k: -shares[k])
    if not flagged:
        return result(
            "dead-units",
            Status.PASS,
            f"at most {shares[worst]:.0%} of units dead in any of {len(shares)} ReLU calls",
            evidence=evidence,
        )
    evidence["dead_share_by_layer"] = {k: round(shares[k], 3) for k in flagged[:8]}
    return result(
        "dead-units",
        Status.FAIL if shares[worst] >= 0.9 else Status.WARN,
        f"`{worst}`: {shares[worst]:.0%} of its units never activate on this batch",
        evidence=evidence,
        where=flagged,
        causes=[
            "a large negative bias or a mean-shifted input pushes pre-activations below 0",
            "a learning rate that killed the units (after training)",
            "inputs not normalized (e.g. all negative)",
        ],
        fix="initialize biases at 0, normalize inputs and pre-activations (BatchNorm/"
        "LayerNorm), or use LeakyReLU/GELU",
    )


def _amp_dtype(device: torch.device) -> tuple[torch.dtype | None, str]:
    if device.type == "cpu":
        try:
            native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except Exception:
            native = False
        if not native:
            return None, "this CPU has no native bfloat16 support (oneDNN reports none)"
        return torch.bfloat16, "bf16 autocast on CPU"
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, "bf16 autocast on CUDA"
        return torch.float16, "fp16 autocast on CUDA"
    return None, f"autocast is not checked on {device.type}"


def _grads(
    ctx: Context, amp: torch.dtype | None
) -> tuple[float, torch.Tensor, list[torch.Tensor | None]]:
    """(loss, primary output, gradients) of one train-mode step, under autocast or not."""
    torch.manual_seed(ctx.options.seed)  # same dropout masks in both runs
    ctx.zero_grads()
    with torch.autocast(ctx.device.type, dtype=amp, enabled=amp is not None):
        out, loss = ctx.train_loss()
    if loss.requires_grad:
        backward(loss)
    y = primary_output(out).detach().float()
    return (
        float(loss.detach().float()),
        y,
        [None if p.grad is None else p.grad.detach().float().clone() for _, p in ctx.trainable()],
    )


@register("amp-drift", title="autocast agrees with fp32", cost="2 fwd+bwd")
def amp_drift(ctx: Context) -> CheckResult:
    dtype, how = _amp_dtype(ctx.device)
    if dtype is None:
        return result("amp-drift", Status.SKIP, how)
    l32, y32, g32 = _grads(ctx, None)
    try:
        l16, y16, g16 = _grads(ctx, dtype)
    except Exception as exc:
        return result(
            "amp-drift",
            Status.FAIL,
            f"forward fails under {how}: {type(exc).__name__}: {str(exc)[:200]}",
            causes=["explicit .float()/.half() casts that mix dtypes inside forward"],
            fix="let autocast pick dtypes; do not cast activations by hand",
        )
    rel = abs(l16 - l32) / max(abs(l32), 1e-8)
    # the output is where a lost signal shows first: at init the loss sits near chance
    # whatever the logits are, so a model whose logits are garbage in bf16 can keep it
    out_rel = float((y16 - y32).norm() / y32.norm().clamp_min(1e-12))
    pairs = [
        (n, a, b)
        for (n, _), a, b in zip(ctx.trainable(), g32, g16, strict=True)
        if a is not None and b is not None
    ]
    cos_all = _cos([a for _, a, _ in pairs], [b for _, _, b in pairs])
    per = {n: _cos([a], [b]) for n, a, b in pairs if float(a.norm()) > 0}
    worst = min(per, key=per.__getitem__) if per else None
    evidence: dict[str, Any] = {
        "mode": how,
        "loss_fp32": l32,
        "loss_autocast": l16,
        "loss_rel_error": rel,
        "output_rel_error": out_rel,
        "grad_cosine": cos_all,
    }
    if worst:
        evidence["lowest_param_cosine"] = f"{worst} ({per[worst]:.4f})"
    # bf16 keeps 8 mantissa bits (~0.4% per value); deep nets accumulate a few % of
    # output error and gradient cosines around 0.95 at init without anything wrong
    # The gradient cosine only warns: deep nets at init (MobileNetV2: ~0.4) have
    # gradients so sensitive that bf16 rounding alone turns them, with healthy outputs.
    if not math.isfinite(l16) or rel > 0.2 or out_rel > 0.5:
        status = Status.FAIL
    elif rel > 0.05 or out_rel > 0.15 or cos_all < 0.85:
        status = Status.WARN
    else:
        return result(
            "amp-drift",
            Status.PASS,
            f"{how}: output rel. error {out_rel:.2g}, loss {rel:.2g}, gradient cosine "
            f"{cos_all:.3f}",
            evidence=evidence,
        )
    return result(
        "amp-drift",
        status,
        f"{how} drifts from fp32: output rel. error {out_rel:.2g}, loss {rel:.2g}, "
        f"gradient cosine {cos_all:.3f}",
        evidence=evidence,
        where=[worst] if worst else [],
        causes=[
            "large-magnitude inputs or activations (un-normalized features, big offsets): "
            "bf16 keeps ~3 significant digits",
            "a hand-written softmax/variance/log-sum-exp that cancels catastrophically",
        ],
        fix="normalize inputs, compute sensitive reductions in fp32 "
        "(with torch.autocast(..., enabled=False)), or keep this model in fp32",
    )


def _cos(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    if not a:
        return 1.0
    # Accumulate tensor by tensor in float64: one float32 dot product over 100M+
    # gradient entries drifts by percent and gave cosines above 1 on GPT-2.
    dot = xx = yy = 0.0
    for left, right in zip(a, b, strict=True):
        x, y = left.detach().double().flatten(), right.detach().double().flatten()
        dot, xx, yy = dot + float(x @ y), xx + float(x @ x), yy + float(y @ y)
    denom = (xx * yy) ** 0.5
    return max(-1.0, min(1.0, dot / denom)) if denom > 0 else 1.0
