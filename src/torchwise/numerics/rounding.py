"""Floating-point precisions, their rounding emulated in float32, and a noise band to judge by.

A change of precision (bf16 or fp16 autocast, TF32) or of summation order (another
kernel, layout, thread count, a fused optimizer) moves a training step's numbers.
Whether it moved them *too much* is only answerable against what that change
itself explains, measured on the same model: so a judge runs a *twin*, the fp32
step with only the change's rounding applied (:class:`Rounded`), and compares the
change's deviation from fp32 with the twin's (:class:`Band`).

The emulation rounds float32 values to the precision's mantissa, round to nearest
even, as the hardware does when it converts: bf16 keeps 7 explicit mantissa bits,
fp16 and TF32 keep 10. Autocast's low-precision ops (matrix products,
convolutions, attention; forward and backward) get their inputs rounded and, for
autocast, their outputs too; TF32 rounds only the inputs and accumulates in fp32.
fp16's narrow exponent range is not emulated: GradScaler is what keeps gradients
inside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


@dataclass(frozen=True)
class Precision:
    """A floating-point format as its rounding: explicit mantissa bits, and what it rounds."""

    name: str
    mantissa_bits: int
    #: autocast rounds its ops' outputs too; TF32 only the inputs (fp32 accumulation)
    rounds_outputs: bool


FP32 = Precision("fp32", 23, rounds_outputs=False)
TF32 = Precision("tf32", 10, rounds_outputs=False)
FP16 = Precision("fp16", 10, rounds_outputs=True)
BF16 = Precision("bf16", 7, rounds_outputs=True)


def round_mantissa(tensor: torch.Tensor, bits: int) -> torch.Tensor:
    """A float32 tensor rounded to ``bits`` explicit mantissa bits (nearest, ties to even).

    Other dtypes, and values that are not finite, are returned as they are.
    """
    if tensor.dtype != torch.float32 or bits >= 23:
        return tensor
    drop = 23 - bits
    raw = tensor.contiguous().view(torch.int32)
    # Adding half an ulp of the kept mantissa (minus one, plus the kept lowest
    # bit: ties to even) and clearing the dropped bits rounds the bit pattern;
    # a carry into the exponent is the correct rounding up to the next binade.
    lowest_kept = (raw >> drop) & 1
    rounded = (raw + ((1 << (drop - 1)) - 1) + lowest_kept) & ~((1 << drop) - 1)
    out = rounded.view(torch.float32).view(tensor.shape)
    return torch.where(torch.isfinite(tensor), out, tensor)


#: aten op names autocast runs in low precision (and TF32 affects), forward and backward.
_LOW_PRECISION_NAMES = frozenset(
    {
        "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_addmm_activation",
        "convolution", "convolution_backward", "_convolution", "cudnn_convolution",
        "mkldnn_convolution", "conv1d", "conv2d", "conv3d",
    }
)  # fmt: skip


def is_low_precision_op(func: Any) -> bool:
    """Whether autocast runs ``func`` (an aten overload) in bf16/fp16, or TF32 applies to it."""
    name = func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func)
    name = name.removeprefix("aten::")
    return name in _LOW_PRECISION_NAMES or "attention" in name


def _rounded(value: Any, bits: int) -> Any:
    if isinstance(value, torch.Tensor):
        return round_mantissa(value, bits)
    if isinstance(value, (list, tuple)):
        return type(value)(_rounded(v, bits) for v in value)
    return value


class Rounded(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Run float32 code with ``precision``'s rounding at autocast's low-precision ops.

    Below autograd, so the backward's products are rounded as well; everything
    else stays float32 (real autocast also runs some elementwise ops in low
    precision: a judge allows a margin over this twin).
    """

    def __init__(self, precision: Precision) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.precision = precision

    def __torch_dispatch__(self, func: Any, _types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if not is_low_precision_op(func):
            return func(*args, **kwargs)
        bits = self.precision.mantissa_bits
        out = func(*_rounded(args, bits), **_rounded(kwargs, bits))
        return _rounded(out, bits) if self.precision.rounds_outputs else out


def deviation(values: Sequence[float], reference: Sequence[float]) -> float:
    """The largest absolute difference between two series (inf where one is not finite)."""
    worst = 0.0
    for a, b in zip(values, reference, strict=True):
        if math.isfinite(a) != math.isfinite(b):
            return math.inf
        if math.isfinite(a):
            worst = max(worst, abs(a - b))
    return worst


@dataclass(frozen=True)
class Band:
    """How far a change may move a series: ``margin`` times the twin's move, plus a floor.

    ``noise`` is the largest deviation of the twins (the runs that differ from the
    reference only by what the change explains). ``floor`` keeps a band of zero
    width from failing a change when the twins happen to agree exactly with the
    reference (fp32 resolution of the values compared).
    """

    noise: float
    margin: float
    floor: float

    @property
    def limit(self) -> float:
        return self.margin * self.noise + self.floor

    def admits(self, value: float) -> bool:
        return value <= self.limit


def float32_floor(values: Sequence[float], ulps: int = 64) -> float:
    """``ulps`` float32 ulps of the largest finite magnitude in ``values``."""
    finite = [abs(v) for v in values if math.isfinite(v)]
    return ulps * 2.0**-23 * max(finite, default=1.0)


def band(
    reference: Sequence[float],
    twins: Sequence[Sequence[float]],
    *,
    margin: float,
    floor: Callable[[Sequence[float]], float] = float32_floor,
) -> Band:
    """The band a change's series must stay within: the twins' largest deviation times
    ``margin``, plus ``floor``."""
    noise = max((deviation(t, reference) for t in twins), default=0.0)
    return Band(noise, margin, floor(reference))
