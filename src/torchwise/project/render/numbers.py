"""How the project report prints counts, FLOPs and bytes (three significant digits)."""

from __future__ import annotations

_DECIMAL = ((10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k"))
_BINARY = ((1 << 50, "PiB"), (1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def _scaled(value: float, prefixes: tuple[tuple[int, str], ...]) -> tuple[str, str]:
    for factor, prefix in prefixes:
        if abs(value) >= factor:
            return f"{value / factor:.3g}", prefix
    return f"{value:.3g}", ""


def count(value: float | None, unit: str = "") -> str:
    """``count(11_689_512) == "11.7 M"``, ``count(None) == "n/a"``."""
    if value is None:
        return "n/a"
    text, prefix = _scaled(value, _DECIMAL)
    return f"{text} {prefix}{unit}".rstrip()


def nbytes(value: float | None) -> str:
    """``nbytes(46_758_048) == "44.6 MiB"``."""
    if value is None:
        return "n/a"
    text, prefix = _scaled(value, _BINARY)
    return f"{text} {prefix or 'B'}"


def exact(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,}"


def seconds(value: float) -> str:
    return f"{value:.1f}s" if value < 60 else f"{value // 60:.0f}m{value % 60:02.0f}s"
