"""Errors measured in units of floating-point noise (unit roundoff, reordered sums).

A tolerance is only meaningful next to the noise of what it judges. Two sources of
noise recur: the rounding of a low-precision dtype (bf16 keeps 8 significant bits,
fp16 11, fp32 24), and the reordering of sums by a different kernel (a reduction
of n terms moves by about ``sqrt(n)`` roundings of its largest terms). This module
names them once, for doctor's amp-drift and determinism checks and for any other
capability that compares two numerical runs (tune's correctness oracle compares a
knob's step with the baseline's the same way).

:func:`amplification` is the calibrated measure: how many times larger an error is
than the error that rounding the same model's weights and inputs to the dtype, once,
already causes. A model that is merely sensitive (deep, at initialisation) scores
near 1 whatever its absolute error; an expression that loses precision to
cancellation scores in the tens or hundreds.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: Unit roundoff (half the gap between 1 and the next number) per dtype name.
UNIT_ROUNDOFF = {
    "bfloat16": 2.0**-8,
    "float16": 2.0**-11,
    "tfloat32": 2.0**-11,
    "float32": 2.0**-24,
    "float64": 2.0**-53,
}


def unit_roundoff(dtype: torch.dtype | str) -> float:
    """``u`` for ``dtype`` (a torch dtype or a name in :data:`UNIT_ROUNDOFF`)."""
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    try:
        return UNIT_ROUNDOFF[name]
    except KeyError:
        raise ValueError(f"no unit roundoff known for {name}") from None


def rounded(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` rounded to ``dtype`` and back: the value a low-precision copy holds."""
    return t.to(dtype).to(t.dtype)


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """``||value - reference|| / ||reference||`` (inf for different shapes)."""
    if value.shape != reference.shape:
        return math.inf
    ref = reference.double()
    return float((value.double() - ref).norm() / ref.norm().clamp_min(1e-30))


def spread_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """The error relative to how much ``reference`` varies (its distance from its mean).

    Near-zero outputs (logits at initialisation, a zero-initialised last layer) make a
    plain relative error large out of all proportion to what changes; the spread is
    the signal a prediction carries. 0 when both are constant and equal.
    """
    if value.shape != reference.shape:
        return math.inf
    ref = reference.double()
    err = float((value.double() - ref).norm())
    spread = float((ref - ref.mean()).norm())
    if spread == 0.0:
        return 0.0 if err == 0.0 else math.inf
    return err / spread


def reduction_tolerance(dtype: torch.dtype | str, terms: int) -> float:
    """The relative error of a sum of ``terms`` values summed in another order: about
    ``sqrt(terms)`` unit roundoffs (a random walk of rounding errors), at least one."""
    return unit_roundoff(dtype) * max(1.0, math.sqrt(max(terms, 1)))


def amplification(error: float, reference_error: float, dtype: torch.dtype | str) -> float:
    """``error`` as a multiple of ``reference_error`` (the error that rounding the
    weights and inputs to ``dtype`` once causes), floored at half a unit roundoff so a
    model that is exact under that rounding does not divide by zero."""
    if not math.isfinite(error):
        return math.inf
    return error / max(reference_error, unit_roundoff(dtype) / 2)
