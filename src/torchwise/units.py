"""One way to print a number: counts, FLOPs, bytes, exponents.

Every command that reports sizes (inspect, doc, ckpt) prints the same number the
same way, so a figure can be compared across their outputs:

- :func:`exact` for counts a user checks digit by digit (parameters): ``11,689,512``;
- :func:`count` for large counts and rates (FLOPs, MACs): three significant
  digits with a decimal SI prefix, as FLOP figures are published: ``11.7 M``,
  ``1.81 GFLOPs``;
- :func:`nbytes` for memory: three significant digits with a binary prefix, as
  memory is allocated in powers of two: ``44.6 MiB``;
- :func:`duration` for measured times: three significant digits in s, ms or µs:
  ``138 ms``;
- :func:`exponent` for a fitted power: ``2`` when it is an integer, else ``1.06``.

Three significant digits keep every figure within 0.5% of the exact one, which
is finer than any two runs of a real model agree on memory, and short enough
for a table column.
"""

from __future__ import annotations

#: Decimal prefixes for counts, largest first (SI: lowercase k).
_DECIMAL = ((10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k"))
#: Binary prefixes for bytes, largest first.
_BINARY = ((1 << 50, "PiB"), (1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def _three_digits(value: float) -> str:
    """``value`` to three significant digits, without trailing zeros or exponent."""
    text = f"{value:.3g}"
    if "e" in text:  # .3g switches to exponent notation from 1e3 on
        text = f"{round(value):d}"
    return text


def _scaled(value: float, prefixes: tuple[tuple[int, str], ...], base: int) -> tuple[str, str]:
    """Mantissa text and prefix, moving up a prefix when rounding reaches ``base``."""
    magnitude = abs(value)
    for index, (factor, prefix) in enumerate(prefixes):
        if magnitude >= factor:
            text = _three_digits(value / factor)
            if abs(float(text)) >= base and index > 0:
                return _three_digits(value / prefixes[index - 1][0]), prefixes[index - 1][1]
            return text, prefix
    text = _three_digits(value)
    smallest_factor, smallest = prefixes[-1]
    if abs(float(text)) >= smallest_factor:  # 999.7 rounds to 1000: show 1 k
        return _three_digits(value / smallest_factor), smallest
    return text, ""


def count(value: float | None, unit: str = "") -> str:
    """A count with a decimal prefix: ``count(11_689_512) == "11.7 M"``,
    ``count(1_814_073_344, "FLOPs") == "1.81 GFLOPs"``, ``count(None) == "n/a"``."""
    if value is None:
        return "n/a"
    text, prefix = _scaled(value, _DECIMAL, 1000)
    return f"{text} {prefix}{unit}".rstrip()


def nbytes(value: float | None) -> str:
    """Bytes with a binary prefix: ``nbytes(46_758_048) == "44.6 MiB"``, ``nbytes(12) == "12 B"``,
    ``nbytes(None) == "n/a"``."""
    if value is None:
        return "n/a"
    text, prefix = _scaled(value, _BINARY, 1024)
    return f"{text} {prefix or 'B'}"


def duration(seconds: float | None) -> str:
    """Seconds, three significant digits, in s, ms or µs: ``duration(0.1384) == "138 ms"``,
    ``duration(2.25) == "2.25 s"``, ``duration(None) == "n/a"`` (as is a non-finite time)."""
    if seconds is None or seconds != seconds or seconds in (float("inf"), float("-inf")):
        return "n/a"
    magnitude = abs(seconds)
    if magnitude >= 1 or magnitude == 0:
        return f"{_three_digits(seconds)} s"
    if magnitude >= 1e-3:
        text = _three_digits(seconds * 1e3)
        return f"{_three_digits(seconds)} s" if text in ("1000", "-1000") else f"{text} ms"
    text = _three_digits(seconds * 1e6)
    return f"{text} µs" if text not in ("1000", "-1000") else f"{_three_digits(seconds * 1e3)} ms"


def exact(value: int) -> str:
    """An exact integer with thousands separators: ``exact(11_689_512) == "11,689,512"``."""
    return f"{value:,}"


def exponent(value: float) -> str:
    """A fitted power: ``"2"`` within 0.005 of an integer, else two decimals (``"1.06"``)."""
    nearest = round(value)
    return str(nearest) if abs(value - nearest) < 0.005 else f"{value:.2f}"
