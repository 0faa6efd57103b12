"""Measurements several checks share, computed once per run and typed.

``ctx``-level facts are :func:`functools.cached_property` attributes of
:class:`Facts`: the first check that reads ``facts.backward`` pays for one
forward and backward; later checks reuse the result. Every fact is a detached
copy, and the runner restores the model after each check, so a fact never
depends on which check asked first.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field

import torch
from torch import nn

from torchwise.doctor.context import Context, primary_output, reseed_all
from torchwise.doctor.state import Snapshot
from torchwise.doctor.trace import call_order, frame_owner
from torchwise.tensortree import tensors_in

#: extra seeds a training step is repeated with before a parameter that got no gradient
#: is called unused: layer drop / stochastic depth skip a layer in one step, not in four
RESEEDS = 3
#: at most this many groups of gradient-less parameters are perturbed to see whether
#: they can affect the output at all (one forward each)
PERTURBED_GROUPS = 16


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
        """One train-mode forward + backward with the run's loss (from the run's seed)."""
        return _backward(self._ctx, self._ctx.options.seed)

    @functools.cached_property
    def skipped_at_random(self) -> frozenset[str]:
        """Parameters with no gradient in the first step that get one in a step drawn from
        another seed: a layer that training skips at random (layer drop, stochastic
        depth), not one that is never used. Each step is replayed from its seed."""
        ctx = self._ctx
        missing = {n for n, g in self.backward.grads.items() if g is None}
        found: set[str] = set()
        for k in range(1, RESEEDS + 1):
            if not missing - found:
                break
            grads = _backward(ctx, ctx.options.seed + k).grads
            found |= {n for n in missing if grads.get(n) is not None}
        return frozenset(found)

    @functools.cached_property
    def discarded(self) -> frozenset[str]:
        """Gradient-less parameters whose value cannot change any output: their result is
        computed and then thrown away (SD3's last block computes text queries it never
        uses; OwlViT's detector runs CLIP's projection for logits it discards).

        Measured: the parameters of one module at a time get large random values and
        the training forward is replayed from the same seed; bit-identical outputs mean
        no effect. A dead ReLU layer revives under such values, a detached branch that
        is still added to the output changes it, so neither is mistaken for discarded.
        """
        ctx = self._ctx
        info = self.backward
        candidates = [
            n
            for n, g in info.grads.items()
            if (g is None and n not in self.skipped_at_random) or (g is not None and not g.any())
        ]
        if not candidates:
            return frozenset()
        groups: dict[str, list[str]] = {}
        for name in candidates:
            groups.setdefault(owner(name), []).append(name)
        params = dict(ctx.model.named_parameters())
        reference = _outputs(ctx)
        found: set[str] = set()
        gen = torch.Generator().manual_seed(ctx.options.seed + 7)
        for names in list(groups.values())[:PERTURBED_GROUPS]:
            saved = [params[n].detach().clone() for n in names]
            try:
                with torch.no_grad():
                    for n in names:
                        p = params[n]
                        noise = torch.randn(p.shape, generator=gen).to(p.device, p.dtype)
                        p.add_(noise * (10 * float(p.detach().abs().mean()) + 1.0))
                after = _outputs(ctx)
            finally:
                with torch.no_grad():
                    for n, value in zip(names, saved, strict=True):
                        params[n].copy_(value)
            if after is not None and reference is not None and _identical(reference, after):
                found.update(names)
        return frozenset(found)

    def library_owned(self, param_name: str) -> bool:
        """Whether the code that owns this parameter is an installed library's (the
        nearest module above it that is not one of torch.nn's building blocks)."""
        module: nn.Module | None = self._ctx.model
        chain: list[nn.Module] = [self._ctx.model]
        for part in owner(param_name).split(".") if owner(param_name) else []:
            module = getattr(module, part, None)
            if not isinstance(module, nn.Module):
                break
            chain.append(module)
        for module in reversed(chain):
            cls = type(module)
            if cls.__module__.startswith("torch.nn"):
                continue
            try:
                source = inspect.getsourcefile(cls)
            except (TypeError, OSError):
                return False
            return source is not None and frame_owner(source) == "library"
        return False

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
            after = _backward(ctx, ctx.options.seed).grads
        finally:
            snapshot.restore(rng=False)
        return frozenset(n for n in blocked if (g := after.get(n)) is not None and bool(g.any()))


def _outputs(ctx: Context) -> list[torch.Tensor] | None:
    """Every tensor of one training forward replayed from the run's seed; None if it fails."""
    ctx.reseed()
    try:
        with torch.no_grad():
            out = ctx.forward(train=True)
    except Exception:
        return None
    return [t.detach().clone() for t in tensors_in(out)]


def _identical(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b, strict=True)
    )


def _backward(ctx: Context, seed: int) -> BackwardInfo:
    ctx.zero_grads()
    reseed_all(seed)
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
