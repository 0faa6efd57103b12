"""Floating-point noise: what every numerical judgement calibrates against.

A tolerance is only meaningful next to the noise of what it judges. Two
sources recur: the rounding of a lower precision (bf16 keeps 8 significant
bits, fp16 and TF32 11, fp32 24) and the reordering of sums by another kernel.

- :mod:`.rounding`: precisions as rounding, emulated in float32 inside a
  dispatch mode (:class:`Rounded`), and the noise band a precision change is
  judged by (:class:`Band`): tune's correctness oracle.
- :mod:`.error`: unit roundoff per dtype, relative errors, the tolerance of a
  reordered reduction, and :func:`amplification` (an error measured in units
  of the error that rounding the same inputs once already causes): doctor's
  amp-drift and determinism checks.
"""

from torchwise.numerics.error import (
    UNIT_ROUNDOFF,
    amplification,
    reduction_tolerance,
    relative_error,
    rounded,
    spread_error,
    unit_roundoff,
)
from torchwise.numerics.rounding import (
    BF16,
    FP16,
    FP32,
    TF32,
    Band,
    Precision,
    Rounded,
    band,
    deviation,
    float32_floor,
    is_low_precision_op,
    round_mantissa,
)

__all__ = [
    "BF16",
    "FP16",
    "FP32",
    "TF32",
    "UNIT_ROUNDOFF",
    "Band",
    "Precision",
    "Rounded",
    "amplification",
    "band",
    "deviation",
    "float32_floor",
    "is_low_precision_op",
    "reduction_tolerance",
    "relative_error",
    "round_mantissa",
    "rounded",
    "spread_error",
    "unit_roundoff",
]
