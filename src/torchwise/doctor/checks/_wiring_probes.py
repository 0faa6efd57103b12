"""The measurements behind the wiring check: each one reads what the model does.

- :class:`WeightWatch`: which tensors forward passes as the ``weight`` or ``bias`` of a
  layer function (``F.linear``, ``F.conv2d``, ``F.layer_norm``, ...), seen through a
  torch function mode, so a buffer standing in for a weight is found by its use.
- :class:`SoftmaxWatch`: every softmax output followed through views, transposes and
  dropout to the matrix product that consumes it, at the dispatcher; attention
  weights must be summed over the dim they were normalised over.
- :func:`skip_gain`: a repeated block called on its recorded input with the weights
  of its layers set to zero, so only its skip path is left; a residual block passes
  its input through once (gain 1).
- :func:`copied_parameters`: trainable parameters that hold exactly the same values
  without being the same parameter (a tie broken by copying).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from torchwise.tensortree import tensors_in

#: layer functions -> (positional index of the weight, of the bias); keywords by name
LAYER_FUNCTIONS: dict[Callable[..., Any], tuple[int, int]] = {
    F.linear: (1, 2),
    F.bilinear: (2, 3),
    F.conv1d: (1, 2),
    F.conv2d: (1, 2),
    F.conv3d: (1, 2),
    F.conv_transpose1d: (1, 2),
    F.conv_transpose2d: (1, 2),
    F.conv_transpose3d: (1, 2),
    F.layer_norm: (2, 3),
    F.group_norm: (2, 3),
    F.batch_norm: (3, 4),
    F.instance_norm: (3, 4),
}
if hasattr(F, "rms_norm"):
    LAYER_FUNCTIONS[F.rms_norm] = (2, 99)
#: matrix products: their right operand is a weight when it is named like one
MATMULS = {torch.matmul, torch.mm, torch.bmm, torch.Tensor.__matmul__, torch.Tensor.matmul,
           torch.Tensor.mm, torch.Tensor.bmm}  # fmt: skip


class WeightWatch(TorchFunctionMode):
    """Records the ids of tensors passed as a layer function's weight or bias."""

    def __init__(self) -> None:
        super().__init__()
        self.as_weight: dict[int, str] = {}  # id(tensor) -> "F.linear weight"

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in MATMULS and len(args) > 1 and isinstance(args[1], torch.Tensor):
            self.as_weight.setdefault(id(args[1]), "matmul operand")
        slots = LAYER_FUNCTIONS.get(func)
        if slots is not None:
            for role, index in zip(("weight", "bias"), slots, strict=True):
                value = kwargs.get(role, args[index] if len(args) > index else None)
                if isinstance(value, torch.Tensor):
                    self.as_weight.setdefault(id(value), f"F.{func.__name__} {role}")
        return func(*args, **kwargs)


aten = torch.ops.aten
#: ops that keep every element where it was, dim for dim (the normalised dim stays put)
_SAME_LAYOUT = {
    aten.clone.default, aten.detach.default, aten.alias.default, aten._to_copy.default,
    aten.masked_fill.Scalar, aten.masked_fill.Tensor, aten.contiguous.default,
    aten.dropout.default, aten.lift_fresh.default,
}  # fmt: skip
_SCALED = {aten.mul.Tensor, aten.div.Tensor, aten.mul.Scalar, aten.div.Scalar}


@dataclass
class AxisFinding:
    """A softmax output summed over another dim than the one it was normalised over."""

    module: str
    softmax_dim: int  # of the softmax's input
    summed_dim: int  # in the same numbering
    shape: tuple[int, ...]
    op: str


class SoftmaxWatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Follows softmax outputs (which dim sums to one) to the matrix products they feed."""

    def __init__(self, stack: list[str], root: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.stack, self.root = stack, root
        #: id(tensor) -> (the tensor, its normalised dim, the softmax's dim, its shape)
        self.tagged: dict[int, tuple[torch.Tensor, int, int, tuple[int, ...]]] = {}
        self.findings: list[AxisFinding] = []
        self.consumed = 0  # softmax outputs that reached a matrix product

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in (aten._softmax.default, aten.softmax.int) and isinstance(out, torch.Tensor):
            dim = int(args[1]) % out.ndim
            if out.shape[dim] > 1:  # a softmax over one element is 1 whatever the axis
                self._tag(out, dim, dim, tuple(out.shape))
            return out
        if func in (aten.mm.default, aten.bmm.default):
            self._consume(func, args[0], args[1], out.ndim)
            return out
        if func in (aten.baddbmm.default, aten.addmm.default):
            self._consume(func, args[1], args[2], out.ndim)
            return out
        first = args[0] if args else None
        if not isinstance(first, torch.Tensor) or id(first) not in self.tagged:
            return out
        _, dim, origin, shape = self.tagged[id(first)]
        result = out[0] if isinstance(out, tuple) else out
        if not isinstance(result, torch.Tensor):
            return out
        moved = _moved_dim(func, args, first, result, dim)
        if moved is not None:
            self._tag(result, moved, origin, shape)
        return out

    def _tag(self, t: torch.Tensor, dim: int, origin: int, shape: tuple[int, ...]) -> None:
        if len(self.tagged) < 4096:
            self.tagged[id(t)] = (t, dim, origin, shape)

    def _consume(self, func: Any, left: Any, right: Any, ndim: int) -> None:
        for operand, contracted in ((left, ndim - 1), (right, ndim - 2)):
            if not isinstance(operand, torch.Tensor) or id(operand) not in self.tagged:
                continue
            _, dim, origin, shape = self.tagged[id(operand)]
            self.consumed += 1
            if dim != contracted and len(self.findings) < 8:
                summed = _origin_dim(operand, contracted, dim, origin)
                module = (self.stack[-1] or self.root) if self.stack else "forward"
                name = str(func.overloadpacket.__name__)
                self.findings.append(AxisFinding(module, origin, summed, shape, name))


def _moved_dim(func: Any, args: Any, src: torch.Tensor, out: torch.Tensor, dim: int) -> int | None:
    """Where the normalised dim ``dim`` of ``src`` is in ``out``; None when it is lost."""
    if func in _SAME_LAYOUT or func is aten.native_dropout.default:
        return dim if out.shape == src.shape else None
    if func in _SCALED:
        other = args[1] if len(args) > 1 else None
        scalar = not isinstance(other, torch.Tensor) or other.ndim == 0
        return dim if scalar and out.shape == src.shape else None
    if func is aten.transpose.int:
        a, b = int(args[1]) % src.ndim, int(args[2]) % src.ndim
        return b if dim == a else a if dim == b else dim
    if func is aten.t.default:
        return 1 - dim if src.ndim == 2 else dim
    if func is aten.permute.default:
        order = [int(d) % src.ndim for d in args[1]]
        return order.index(dim)
    if func is aten.unsqueeze.default:
        at = int(args[1]) % (src.ndim + 1)
        return dim + 1 if at <= dim else dim
    if func is aten.expand.default:
        return dim + (out.ndim - src.ndim)
    if func in (aten.view.default, aten._unsafe_view.default, aten.reshape.default):
        return _reshaped_dim(tuple(src.shape), tuple(out.shape), dim)
    return None


def _reshaped_dim(before: tuple[int, ...], after: tuple[int, ...], dim: int) -> int | None:
    """The dim of ``after`` holding ``before[dim]`` intact, with the same elements after it."""
    size, tail = before[dim], math.prod(before[dim + 1 :])
    for j, s in enumerate(after):
        if s == size and math.prod(after[j + 1 :]) == tail:
            return j
    return None


def _origin_dim(operand: torch.Tensor, contracted: int, dim: int, origin: int) -> int:
    """The contracted dim in the softmax's own numbering (its offset from the normalised
    dim carried over); for a report, not for the decision."""
    return origin + (contracted - dim)


def _role(name: str) -> str:
    return ".".join("#" if part.isdigit() else part for part in name.split("."))


def _drawn_at_random(values: torch.Tensor) -> bool:
    """A matrix (two dims above 1) of mostly distinct values: what a random init draws.
    Formula inits (ramps, identities, constants) repeat across roles by design."""
    if sum(d > 1 for d in values.shape) < 2:
        return False
    distinct = torch.unique(values.flatten())
    return int(distinct.numel()) * 2 >= values.numel()


def copied_parameters(named: Iterable[tuple[str, nn.Parameter]]) -> list[tuple[str, str]]:
    """Pairs of distinct trainable parameters with identical, randomly drawn values in
    different roles. Repeated blocks cloned from one (``nn.TransformerEncoder`` deep-copies
    its layer) start equal by design and train apart on different inputs; parameters
    computed by a formula (RWKV's time-mix ramps) are equal by construction."""
    groups: dict[tuple[Any, ...], list[tuple[str, torch.Tensor]]] = {}
    seen: set[int] = set()
    for name, p in named:
        if id(p) in seen or not p.requires_grad or p.numel() < 16 or not p.is_floating_point():
            continue
        seen.add(id(p))
        values = p.detach()
        if values.device.type == "meta" or not _drawn_at_random(values):
            continue
        key = (tuple(values.shape), values.dtype, float(values.double().sum()),
               float(values.double().abs().sum()))  # fmt: skip
        groups.setdefault(key, []).append((name, values))
    pairs = []
    for members in groups.values():
        for i, (name_a, a) in enumerate(members):
            for name_b, b in members[i + 1 :]:
                if _role(name_a) != _role(name_b) and torch.equal(a, b):
                    pairs.append((name_a, name_b))
    return pairs


def shared_storage(named: Iterable[tuple[str, nn.Parameter]]) -> list[tuple[str, str]]:
    """Pairs of distinct parameters over the same memory (``b.data = a.data``)."""
    by_ptr: dict[tuple[int, tuple[int, ...]], str] = {}
    seen: set[int] = set()
    pairs = []
    for name, p in named:
        if id(p) in seen or p.device.type == "meta" or p.numel() == 0:
            continue
        seen.add(id(p))
        key = (p.data_ptr(), tuple(p.shape))
        if key in by_ptr:
            pairs.append((by_ptr[key], name))
        else:
            by_ptr[key] = name
    return pairs


@dataclass
class SkipGain:
    block: str
    gain: float  # y = gain * x once the block's layers are zeroed
    misfit: float  # how far y is from a multiple of x (0: exactly one)
    homogeneous: bool  # doubling x doubles y (a plain skip, not a normalisation)


def _zeroed_parameters(block: nn.Module) -> dict[str, torch.Tensor]:
    """Zeros for every weight matrix / kernel of the block and for the biases of the same
    layers, so every learned transformation outputs zero; norms keep their values."""
    owners = {n.rpartition(".")[0] for n, p in block.named_parameters() if p.ndim >= 2}
    zeroed = {}
    for name, p in block.named_parameters():
        layer, _, leaf = name.rpartition(".")
        if p.ndim >= 2 or (leaf == "bias" and layer in owners):
            zeroed[name] = torch.zeros_like(p)
    return zeroed


def _first_float(value: Any) -> torch.Tensor | None:
    return next((t for t in tensors_in(value) if t.is_floating_point() and t.ndim), None)


def skip_gain(
    block: nn.Module, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> SkipGain | None:
    """The block's skip path gain on its recorded inputs; None when the block has no
    input and output of the same shape, or cannot run with its layers zeroed."""
    x = _first_float(args) if args else _first_float(kwargs)
    if x is None:
        return None
    zeroed = _zeroed_parameters(block)
    if not zeroed:
        return None

    def call(scale: float) -> torch.Tensor | None:
        def scaled(v: Any) -> Any:
            return v * scale if v is x else v

        new_args = tuple(scaled(a) for a in args)
        new_kwargs = {k: scaled(v) for k, v in kwargs.items()}
        with torch.no_grad():
            out = torch.func.functional_call(block, zeroed, new_args, new_kwargs, strict=False)
        y = _first_float(out)
        return None if y is None or y.shape != x.shape else y

    try:
        y, y2 = call(1.0), call(2.0)
    except Exception:
        return None
    if y is None or y2 is None:
        return None
    xd, yd = x.double(), y.double()
    norm = float((xd * xd).sum())
    if norm == 0.0 or not bool(torch.isfinite(yd).all()):
        return None
    gain = float((xd * yd).sum()) / norm
    misfit = float((yd - gain * xd).norm()) / max(float(yd.norm()), 1e-30)
    homogeneous = float((y2.double() - 2 * yd).norm()) <= 1e-3 * max(float(yd.norm()), 1e-30)
    return SkipGain(name, gain, misfit, homogeneous)
