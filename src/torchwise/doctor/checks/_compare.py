"""Comparing two runs' outputs (shared by the mode and reproducibility checks)."""

from __future__ import annotations

from typing import Any

import torch

from torchwise.tensortree import tensors_in


def max_abs_diff(a: Any, b: Any) -> float:
    """The largest absolute difference between matching tensors of two outputs.

    ``inf`` when shapes differ or integer/bool tensors differ at all; NaN at the same
    place in both counts as equal.
    """
    worst = 0.0
    for x, y in zip(tensors_in(a), tensors_in(b), strict=False):
        if x.shape != y.shape:
            return float("inf")
        if x.is_floating_point():
            if x.numel():
                worst = max(worst, float((x.float() - y.float()).abs().nan_to_num(0.0).max()))
        elif not torch.equal(x, y):
            return float("inf")
    return worst


def relative_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b|| / ||a||`` (inf for different shapes)."""
    if a.shape != b.shape:
        return float("inf")
    return float((a.float() - b.float()).norm() / a.float().norm().clamp_min(1e-12))
