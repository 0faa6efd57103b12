"""Measurements several checks share, computed once per run and typed.

``ctx``-level facts are :func:`functools.cached_property` attributes of
:class:`Facts`: the first check that reads ``facts.backward`` pays for one
forward and backward; later checks reuse the result. Every fact is a detached
copy, and the runner restores the model after each check, so a fact never
depends on which check asked first.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch

from torchwise.doctor.context import Context, primary_output
from torchwise.doctor.state import Snapshot
from torchwise.doctor.tensors import tensors_in
from torchwise.doctor.trace import call_order


@dataclass(frozen=True)
class BackwardInfo:
    """What one forward and backward in train mode produced."""

    loss: float
    #: gradient of every trainable parameter on the loss path (None: no gradient)
    grads: dict[str, torch.Tensor | None]
    #: modules in the order forward first called them
    call_order: list[str] = field(default_factory=list)
    #: parameters that reach only outputs other than the one the loss uses (BERT's pooler)
    secondary_only: frozenset[str] = frozenset()
    error: str | None = None


def owner(param_name: str) -> str:
    """``layer1.0.conv1`` for ``layer1.0.conv1.weight``."""
    return param_name.rsplit(".", 1)[0] if "." in param_name else ""


class Facts:
    """The shared, lazily computed measurements of one doctor run."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    @functools.cached_property
    def backward(self) -> BackwardInfo:
        """One train-mode forward + backward with the run's loss."""
        return _backward(self._ctx)

    @functools.cached_property
    def zero_initialised(self) -> list[str]:
        """Trainable non-bias parameters that are exactly zero before training.

        Zeroing a gate on purpose is common: timm's ResNets zero the last norm of each
        residual block, LayerScale and adaLN-zero start at 0, ControlNet's convs too.
        Until that parameter moves, everything upstream of it gets a zero gradient.
        """
        return [
            name
            for name, p in self._ctx.trainable()
            if p.numel() > 1 and not name.endswith("bias") and not bool(p.detach().any())
        ]

    @functools.cached_property
    def unblocked_by_zero_init(self) -> frozenset[str]:
        """Parameters whose gradient is exactly zero at init only because of a zero gate.

        Measured, not guessed: the zero-initialised parameters are set to small random
        values (a copy of one training step's effect) and the backward is repeated;
        parameters with a zero gradient before and a non-zero one after are blocked only
        by the intentional zero initialisation.
        """
        ctx = self._ctx
        zeros = set(self.zero_initialised)
        blocked = {n for n, g in self.backward.grads.items() if g is not None and not g.any()}
        if not zeros or not blocked:
            return frozenset()
        snapshot = Snapshot(ctx.model)
        try:
            gen = torch.Generator().manual_seed(ctx.options.seed)
            with torch.no_grad():
                for name, p in ctx.trainable():
                    if name in zeros:
                        noise = torch.randn(p.shape, generator=gen).to(p.device, p.dtype)
                        p.copy_(noise * 1e-2)
            after = _backward(ctx).grads
        finally:
            snapshot.restore(rng=False)
        return frozenset(n for n in blocked if (g := after.get(n)) is not None and bool(g.any()))


def _backward(ctx: Context) -> BackwardInfo:
    ctx.zero_grads()
    error = None
    secondary_only: set[str] = set()
    with call_order(ctx.model) as order:
        out, loss = ctx.train_loss()
    primary = primary_output(out)
    others = [
        t
        for t in tensors_in(out)
        if t is not primary and t is not loss and t.requires_grad and t.is_floating_point()
    ]
    if loss.requires_grad:
        loss.backward(retain_graph=bool(others))  # type: ignore[no-untyped-call]
    else:
        error = "the loss does not require grad: the output is detached from every parameter"
    missing = [
        (n, p) for n, p in ctx.model.named_parameters() if p.requires_grad and p.grad is None
    ]
    if others and missing:
        # the loss uses one output; a parameter feeding only the others is not unused
        probe = torch.stack([o.float().sum() for o in others]).sum()
        reached = torch.autograd.grad(probe, [p for _, p in missing], allow_unused=True)
        secondary_only = {n for (n, _), g in zip(missing, reached, strict=True) if g is not None}
    grads = {
        n: (None if p.grad is None else p.grad.detach().clone())
        for n, p in ctx.model.named_parameters()
        if p.requires_grad and n not in secondary_only
    }
    ctx.zero_grads()
    return BackwardInfo(float(loss.detach()), grads, order, frozenset(secondary_only), error)
