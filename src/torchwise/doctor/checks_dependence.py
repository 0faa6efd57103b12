"""Dependence checks: batch-independence and causal-leak.

Both ask "does output region R depend on input region S?". For floating-point
inputs the answer comes from one backward of a random projection of R: any
non-zero input gradient in S is a dependence (exact, and it cannot cancel out the
way a plain sum can, e.g. under a softmax over the batch). Integer inputs (token
ids) are perturbed in S instead and R compared. When a dependence is found, both
runs are recorded module by module to name where it first appears.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from torchwise.doctor.context import Context, map_tensors, primary_output
from torchwise.doctor.registry import register, result
from torchwise.doctor.report import CheckResult, Status
from torchwise.doctor.trace import first_divergence, recording

#: A tensor -> (own part, other part) split along the dim being tested; None if n/a.
Split = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor] | None]


def _grad_dependence(
    ctx: Context, train: bool, select_out: Callable[[torch.Tensor], torch.Tensor], split: Split
) -> tuple[float, float] | None:
    """(largest input gradient outside the region, largest inside); None if untestable."""
    args, kwargs = ctx.fresh_inputs()
    leaves: list[torch.Tensor] = []

    def track(t: torch.Tensor) -> torch.Tensor:
        if t.is_floating_point() and split(t) is not None:
            t.requires_grad_(True)
            leaves.append(t)
        return t

    args, kwargs = map_tensors(args, track), map_tensors(kwargs, track)
    if not leaves:
        return None
    with torch.enable_grad():
        y = select_out(primary_output(ctx.forward(train=train, args=args, kwargs=kwargs)))
        if not y.requires_grad:
            return None
        gen = torch.Generator().manual_seed(ctx.options.seed)
        r = torch.randn(y.shape, generator=gen).to(y.device, y.dtype)
        grads = torch.autograd.grad((y * r).sum(), leaves, allow_unused=True)
    other = own = 0.0
    # allow_unused=True yields None for inputs the output ignores (stubs say Tensor)
    for g in cast("tuple[torch.Tensor | None, ...]", grads):
        if g is None:
            continue
        parts = split(g)
        if parts is None:  # pragma: no cover - leaves were chosen by split()
            continue
        own = max(own, float(parts[0].abs().max()) if parts[0].numel() else 0.0)
        other = max(other, float(parts[1].abs().max()) if parts[1].numel() else 0.0)
    return other, own


def _perturbed(ctx: Context, region: Callable[[torch.Tensor], torch.Tensor | None]) -> Any:
    """Copies of the inputs with ``region(t)`` (a view) overwritten by fresh values."""
    gen = torch.Generator().manual_seed(ctx.options.seed + 1)
    args, kwargs = ctx.fresh_inputs()

    def perturb(t: torch.Tensor) -> torch.Tensor:
        view = region(t)
        if view is None or view.numel() == 0 or t.dtype == torch.bool:
            return t
        if t.is_floating_point():
            noise = torch.randn(view.shape, generator=gen).to(t.device, t.dtype)
            view.copy_(noise * t.float().std().clamp_min(1e-3) + t.float().mean())
        else:  # token ids: any other id in the observed range
            lo, hi = int(t.min()), int(t.max())
            view.copy_(torch.randint(lo, max(hi, lo + 1) + 1, view.shape, generator=gen))
        return t

    return map_tensors(args, perturb), map_tensors(kwargs, perturb)


def _locate(
    ctx: Context,
    perturbed: Any,
    compare: Callable[[torch.Tensor], torch.Tensor | None],
    train: bool = False,
) -> tuple[bool, tuple[str, str] | None]:
    """Run clean and perturbed inputs; (outputs differ in the region, where it starts)."""
    with torch.no_grad():
        with recording(ctx.model) as clean:
            y0 = primary_output(ctx.forward(train=train))
        with recording(ctx.model) as dirty:
            y1 = primary_output(ctx.forward(train=train, args=perturbed[0], kwargs=perturbed[1]))
    a, b = compare(y0), compare(y1)
    differs = a is None or b is None or not torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    return differs, first_divergence(clean, dirty, compare) if differs else None


def _leaked(dep: tuple[float, float] | None) -> bool:
    return dep is not None and dep[1] >= 0 and dep[0] > 1e-6 * max(dep[1], 1e-12)


@register("batch-independence", title="sample i's output ignores sample j", cost="~4 fwd+bwd")
def batch_independence(ctx: Context) -> CheckResult:
    B = ctx.batch_size
    if B < 2:
        return result("batch-independence", Status.SKIP, "needs a batch of at least 2")
    if not ctx.output_shape or ctx.output_shape[0] != B:
        return result(
            "batch-independence",
            Status.SKIP,
            f"the output {list(ctx.output_shape)} has no batch dim of size {B}",
        )
    evidence: dict[str, Any] = {"batch": B, "mode": "eval"}
    leak = None
    for i in sorted({0, B - 1}):
        others = torch.ones(B, dtype=torch.bool)
        others[i] = False

        def split(t: torch.Tensor, i: int = i, others: torch.Tensor = others) -> Any:
            if t.ndim == 0 or t.shape[0] != B:
                return None
            return t[i], t[others.to(t.device)]

        dep = _grad_dependence(ctx, False, _pick(i), split)
        if dep is None:  # integer inputs or no grad path: perturb the other rows instead
            perturbed = _perturbed(ctx, _others(B, i))
            differs, where = _locate(ctx, perturbed, _just(B, i))
            evidence["method"] = "perturbation"
            if differs:
                leak = (i, where)
                break
        else:
            evidence["method"] = "input gradient"
            evidence[f"grad_from_other_samples_row{i}"] = dep[0]
            evidence[f"grad_from_own_sample_row{i}"] = dep[1]
            if _leaked(dep):
                perturbed = _perturbed(ctx, _others(B, i))
                leak = (i, _locate(ctx, perturbed, _just(B, i))[1])
                break
    if leak is not None:
        i, where = leak
        if where:
            evidence["first_divergence"] = where[1]
        return result(
            "batch-independence",
            Status.FAIL,
            f"in eval mode, the output for sample {i} depends on other samples in the batch",
            evidence=evidence,
            where=[where[0]] if where else [],
            causes=[
                "a view/reshape that mixes the batch dim with another one (e.g. "
                "(T, B, C) reshaped as (B, T*C), or x.view(-1, n) with the wrong n)",
                "a softmax, norm, mean or sum over dim 0 instead of the feature dim",
                "BatchNorm with track_running_stats=False (uses batch statistics in eval)",
            ],
            fix="keep dim 0 as the batch through every view/permute (use x.flatten(1) or "
            "x.reshape(x.size(0), -1)); reduce over the feature dims, never dim 0",
        )
    bns = [
        n for n, m in ctx.model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]
    summary = f"no sample's output depends on another sample ({evidence['method']}, eval mode)"
    if bns and any(t.shape[0] == B for t in ctx.float_inputs() if t.ndim):
        others = torch.ones(B, dtype=torch.bool)
        others[0] = False
        dep = _grad_dependence(
            ctx,
            True,
            lambda y: y[0],
            lambda t: (t[0], t[others]) if t.ndim and t.shape[0] == B else None,
        )
        if _leaked(dep):
            evidence["batchnorm_mixes_in_train_mode"] = bns
            summary += f"; {len(bns)} BatchNorm layers mix samples in train mode (expected)"
    return result("batch-independence", Status.PASS, summary, evidence=evidence)


def _pick(i: int) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda y: y[i]


def _others(B: int, i: int) -> Callable[[torch.Tensor], torch.Tensor | None]:
    return lambda t: _rows_except(t, B, i)


def _just(B: int, i: int) -> Callable[[torch.Tensor], torch.Tensor | None]:
    return lambda t: _row(t, B, i)


def _row(t: torch.Tensor, B: int, i: int) -> torch.Tensor | None:
    return t[i] if t.ndim and t.shape[0] == B else None


def _rows_except(t: torch.Tensor, B: int, i: int) -> torch.Tensor | None:
    if not t.ndim or t.shape[0] != B:
        return None
    # a view so the caller can write into it: rows before i, then rows after i
    return t[i + 1 :] if i == 0 else t[:i]


@register("causal-leak", title="position t ignores inputs after t (--causal DIM)", cost="1 fwd+bwd")
def causal_leak(ctx: Context) -> CheckResult:
    d = ctx.options.causal_dim
    if d is None:
        return result("causal-leak", Status.SKIP, "not a causal model (pass --causal DIM)")
    sized = [
        t
        for t in ctx.fresh_inputs()[0] + tuple(ctx.kwargs.values())
        if isinstance(t, torch.Tensor) and t.ndim > d
    ]
    if not sized:
        return result("causal-leak", Status.SKIP, f"no input has a dim {d}")
    T = int(sized[0].shape[d])
    if len(ctx.output_shape) <= d or ctx.output_shape[d] != T:
        return result(
            "causal-leak",
            Status.SKIP,
            f"the output {list(ctx.output_shape)} has no time dim {d} of size {T}",
        )
    if T < 2:
        return result("causal-leak", Status.SKIP, f"needs a sequence of at least 2 (dim {d})")
    t = (T - 1) // 2  # positions 0..t must not see positions t+1..T-1

    def past(x: torch.Tensor) -> torch.Tensor | None:
        return x.narrow(d, 0, t + 1) if x.ndim > d and x.shape[d] == T else None

    def future(x: torch.Tensor) -> torch.Tensor | None:
        return x.narrow(d, t + 1, T - t - 1) if x.ndim > d and x.shape[d] == T else None

    def split(x: torch.Tensor) -> Any:
        p, f = past(x), future(x)
        return None if p is None or f is None else (p, f)

    evidence: dict[str, Any] = {"dim": d, "length": T, "checked_positions": f"0..{t}"}
    dep = _grad_dependence(ctx, False, lambda y: y.narrow(d, 0, t + 1), split)
    if dep is None:
        evidence["method"] = "perturbation of positions after t"
        differs, where = _locate(ctx, _perturbed(ctx, future), past)
    else:
        evidence["method"] = "input gradient"
        evidence["grad_from_future"] = dep[0]
        evidence["grad_from_past"] = dep[1]
        differs = _leaked(dep)
        where = _locate(ctx, _perturbed(ctx, future), past)[1] if differs else None
    if differs:
        if where:
            evidence["first_divergence"] = where[1]
        return result(
            "causal-leak",
            Status.FAIL,
            f"outputs at positions 0..{t} change with inputs at positions {t + 1}..{T - 1}",
            evidence=evidence,
            where=[where[0]] if where else [],
            causes=[
                "attention without a causal mask (is_causal=False / mask not applied)",
                "an off-by-one mask (torch.triu(..., diagonal=0) masks too little)",
                "a convolution or pooling over time that is not left-padded",
                "a normalization or mean over the time dim",
            ],
            fix="mask scores with torch.tril(torch.ones(T, T)) (or pass is_causal=True to "
            "F.scaled_dot_product_attention); left-pad temporal convolutions",
        )
    return result(
        "causal-leak",
        Status.PASS,
        f"positions 0..{t} do not depend on later positions along dim {d}",
        evidence=evidence,
    )
