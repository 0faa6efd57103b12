"""torchwise.units: the one way inspect, doc and ckpt print a number."""

from __future__ import annotations

import pytest

from torchwise import units


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (11_689_512, "", "11.7 M"),  # resnet18's parameters (inspect said 11.69 M, doc 11.7 M)
        (1_814_073_344, "MACs", "1.81 GMACs"),  # torchvision's 1.81 GFLOPS column
        (786_432_000, "FLOPs", "786 MFLOPs"),
        (31_461_000_000_000, "FLOPs", "31.5 TFLOPs"),
        (123_712, "", "124 k"),
        (999, "", "999"),
        (999.7, "", "1 k"),  # rounding reaches the next prefix: never "1e+03" or "1000"
        (999_700, "", "1 M"),
        (0, "FLOPs", "0 FLOPs"),
        (None, "FLOPs", "n/a"),
    ],
)
def test_count(value: float | None, unit: str, text: str) -> None:
    assert units.count(value, unit) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12, "12 B"),
        (1023.7, "1 KiB"),
        (5 * 1024 * 1024, "5 MiB"),
        (46_758_048, "44.6 MiB"),  # 46,758,048 / 2^20 = 44.59
        (25 * 2**30 + 2**29, "25.5 GiB"),
        (None, "n/a"),
    ],
)
def test_nbytes(value: float | None, text: str) -> None:
    assert units.nbytes(value) == text


def test_exact_and_exponent() -> None:
    assert units.exact(124_439_808) == "124,439,808"
    assert units.exponent(2.001) == "2" and units.exponent(1.0612) == "1.06"


def test_duration_three_significant_digits_in_s_ms_or_us() -> None:
    from torchwise.units import duration

    assert duration(0.1384) == "138 ms"
    assert duration(2.25) == "2.25 s"
    assert duration(0.0000447) == "44.7 µs"
    assert duration(0.9996) == "1 s" and duration(0.0009996) == "1 ms"  # rounding moves up
    assert duration(None) == duration(float("nan")) == duration(float("inf")) == "n/a"


def test_tunes_bytes_are_the_core_formatter() -> None:
    from torchwise.units import nbytes

    assert nbytes(5 * 2**40) == "5 TiB"  # tune's own formatter printed 5120.0 GiB
