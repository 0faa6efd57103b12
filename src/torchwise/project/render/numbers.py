"""How the project report prints numbers: torchwise's one way (:mod:`torchwise.units`)."""

from __future__ import annotations

from torchwise.units import count, nbytes
from torchwise.units import exact as _exact

__all__ = ["count", "exact", "nbytes", "seconds"]


def exact(value: int | None) -> str:
    """``11,689,512``; ``n/a`` for a count that was not measured."""
    return "n/a" if value is None else _exact(value)


def seconds(value: float) -> str:
    return f"{value:.1f}s" if value < 60 else f"{value // 60:.0f}m{value % 60:02.0f}s"
