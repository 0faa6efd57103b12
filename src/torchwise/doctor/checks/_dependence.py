"""Does output region R depend on input region S? (batch-independence, causal-leak)

For floating-point inputs the answer comes from one backward of a random
projection of R: any non-zero input gradient in S is a dependence (exact, and it
cannot cancel out the way a plain sum can, e.g. under a softmax over the batch).
Integer inputs (token ids) are perturbed in S instead and R compared. Every
compared forward starts from the same RNG state, so randomness in forward (an
``F.dropout`` left on in eval) cannot pass for a dependence; eval-determinism is
the check that reports it. When a dependence is found, both runs are recorded
module by module to name where it first appears.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, cast

import torch

from torchwise.doctor.context import Context, primary_output
from torchwise.doctor.trace import Trace, first_divergence, recording
from torchwise.tensortree import map_tensors

#: A tensor -> (own part, other part) split along the dim being tested; None if n/a.
Split = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor] | None]
#: A tensor -> a view of one region of it; None if the tensor lacks that dim.
Region = Callable[[torch.Tensor], torch.Tensor | None]

#: a gradient from the other region counts when above this fraction of the own one
LEAK_RATIO = 1e-6


def grad_dependence(
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
        ctx.reseed()
        y = select_out(primary_output(ctx.forward(train=train, args=args, kwargs=kwargs)))
        if not y.requires_grad:
            return None
        gen = torch.Generator().manual_seed(ctx.options.seed)
        r = torch.randn(y.shape, generator=gen).to(y.device, y.dtype)
        grads = torch.autograd.grad((y * r).sum(), leaves, allow_unused=True)
    other = own = 0.0
    # allow_unused=True yields None for inputs the output ignores (stubs say Tensor)
    for g in cast("tuple[torch.Tensor | None, ...]", grads):
        parts = None if g is None else split(g)
        if parts is None:
            continue
        own = max(own, float(parts[0].abs().max()) if parts[0].numel() else 0.0)
        other = max(other, float(parts[1].abs().max()) if parts[1].numel() else 0.0)
    return other, own


def leaked(dep: tuple[float, float] | None) -> bool:
    return dep is not None and dep[0] > LEAK_RATIO * max(dep[1], 1e-12)


def perturbed(ctx: Context, region: Region) -> tuple[Any, Any]:
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


def locate(
    ctx: Context, changed: tuple[Any, Any], compare: Region, train: bool = False
) -> tuple[bool, tuple[str, str] | None]:
    """Run clean and ``changed`` inputs; (outputs differ in the region, where it starts).

    The runs are recorded module by module (to say where) only once they differ.
    """

    def both(record: bool) -> tuple[torch.Tensor, torch.Tensor, Trace, Trace]:
        clean, dirty = Trace(), Trace()
        with torch.no_grad():
            ctx.reseed()
            with recording(ctx.model) if record else contextlib.nullcontext(clean) as clean:
                y0 = primary_output(ctx.forward(train=train))
            ctx.reseed()
            with recording(ctx.model) if record else contextlib.nullcontext(dirty) as dirty:
                y1 = primary_output(ctx.forward(train=train, args=changed[0], kwargs=changed[1]))
        return y0, y1, clean, dirty

    y0, y1, _, _ = both(record=False)
    a, b = compare(y0), compare(y1)
    if a is not None and b is not None and torch.allclose(a, b, rtol=1e-5, atol=1e-6):
        return False, None
    _, _, clean, dirty = both(record=True)
    return True, first_divergence(clean, dirty, compare)
