"""Small, dependency-free SVG charts for the HTML report (no JavaScript, no CDN).

Three shapes cover the report: per-arm distributions (:func:`distributions`: an
IQR box, a median tick and every sample as a dot), curves (:func:`curves`, with
optional log axes and vertical markers) and horizontal bars (:func:`bars`).
Every label is escaped; sizes are in CSS pixels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

from torchwise.tune.stats import iqr, median

PALETTE = (
    "#4269d0",
    "#efb118",
    "#ff725c",
    "#6cc5b0",
    "#3ca951",
    "#ff8ab7",
    "#a463f2",
    "#97bbf5",
    "#9c6b4e",
    "#9498a0",
)
_FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _log_ticks(low: float, high: float) -> list[float]:
    return [
        10.0**e
        for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        if low <= 10.0**e <= high
    ]


def _num(value: float) -> str:
    return f"{value:.3g}"


@dataclass
class _Axis:
    low: float
    high: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            low, high, value = math.log10(self.low), math.log10(self.high), math.log10(value)
        else:
            low, high = self.low, self.high
        span = (high - low) or 1.0
        return self.start + (value - low) / span * (self.end - self.start)

    def ticks(self) -> list[float]:
        return _log_ticks(self.low, self.high) if self.log else _ticks(self.low, self.high)


def distributions(
    rows: Sequence[tuple[str, Sequence[float]]],
    *,
    unit: str = "ms",
    scale: float = 1e3,
    width: int = 640,
    title: str = "",
) -> str:
    """One row per arm: IQR box, median tick and samples (seconds, shown in ``unit``)."""
    rows = [(label, [v * scale for v in values]) for label, values in rows if values]
    if not rows:
        return ""
    label_w, row_h, top = 170, 26, 24
    height = top + row_h * len(rows) + 34
    high = max(max(values) for _, values in rows) * 1.05
    x = _Axis(0.0, high, label_w, width - 12)
    parts = [_svg_open(width, height, title)]
    for tick in x.ticks():
        px = x(tick)
        parts.append(
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top - 6}" y2="{height - 28}" '
            'stroke="#e3e3e3"/>'
        )
        parts.append(
            f'<text x="{px:.1f}" y="{height - 14}" text-anchor="middle" {_FONT}>{_num(tick)}</text>'
        )
    parts.append(
        f'<text x="{width - 12}" y="{height - 2}" text-anchor="end" {_FONT}>'
        f"{escape(unit)} per step</text>"
    )
    for index, (label, values) in enumerate(rows):
        cy = top + row_h * index + row_h / 2
        color = PALETTE[index % len(PALETTE)]
        q1, q3 = iqr(values)
        mid = median(values)
        parts.append(
            f'<text x="{label_w - 8}" y="{cy + 4:.1f}" text-anchor="end" {_FONT}>'
            f"{escape(label)}</text>"
        )
        parts.append(
            f'<rect x="{x(q1):.1f}" y="{cy - 8:.1f}" width="{max(1.0, x(q3) - x(q1)):.1f}" '
            f'height="16" fill="{color}" fill-opacity="0.25" stroke="{color}"/>'
        )
        parts.append(
            f'<line x1="{x(mid):.1f}" x2="{x(mid):.1f}" y1="{cy - 10:.1f}" '
            f'y2="{cy + 10:.1f}" stroke="{color}" stroke-width="2.5"/>'
        )
        for j, value in enumerate(values):
            jitter = ((j * 7919) % 13 - 6) * 0.9  # deterministic spread, no RNG
            parts.append(
                f'<circle cx="{x(value):.1f}" cy="{cy + jitter:.1f}" r="2" '
                f'fill="{color}" fill-opacity="0.7"/>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


@dataclass
class Series:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    dots: bool = False
    dashed: bool = False


@dataclass
class Marker:
    x: float
    label: str


@dataclass
class CurveSpec:
    series: list[Series]
    x_label: str
    y_label: str
    x_log: bool = False
    y_log: bool = False
    markers: list[Marker] = field(default_factory=list)
    hline: tuple[float, str] | None = None
    title: str = ""
    x_format: Callable[[float], str] = _num
    #: tick positions on x, instead of the automatic ones (e.g. the batch sizes tried)
    x_ticks: Sequence[float] | None = None


def curves(spec: CurveSpec, *, width: int = 640, height: int = 280) -> str:
    points = [
        (x, y)
        for s in spec.series
        for x, y in zip(s.xs, s.ys, strict=True)
        if math.isfinite(y) and (not spec.x_log or x > 0) and (not spec.y_log or y > 0)
    ]
    if not points:
        return ""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points] + ([spec.hline[0]] if spec.hline else [])
    left, bottom = 56, height - 36
    x = _Axis(min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1, left, width - 16, spec.x_log)
    y_low, y_high = min(ys), max(ys)
    pad = (y_high - y_low) * 0.05 or 1.0
    y = _Axis(
        y_low if spec.y_log else y_low - pad,
        y_high * 1.05 if spec.y_log else y_high + pad,
        bottom,
        24,
        spec.y_log,
    )
    parts = [_svg_open(width, height, spec.title)]
    for tick in spec.x_ticks if spec.x_ticks is not None else x.ticks():
        parts.append(
            f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="24" y2="{bottom}" '
            f'stroke="#eee"/><text x="{x(tick):.1f}" y="{bottom + 14}" '
            f'text-anchor="middle" {_FONT}>{escape(spec.x_format(tick))}</text>'
        )
    for tick in y.ticks():
        parts.append(
            f'<line x1="{left}" x2="{width - 16}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            f'stroke="#eee"/><text x="{left - 4}" y="{y(tick) + 4:.1f}" '
            f'text-anchor="end" {_FONT}>{_num(tick)}</text>'
        )
    parts.append(
        f'<text x="{(left + width) / 2:.0f}" y="{height - 4}" text-anchor="middle" '
        f"{_FONT}>{escape(spec.x_label)}</text>"
    )
    parts.append(
        f'<text x="12" y="{(24 + bottom) / 2:.0f}" text-anchor="middle" {_FONT} '
        f'transform="rotate(-90 12 {(24 + bottom) / 2:.0f})">{escape(spec.y_label)}</text>'
    )
    if spec.hline is not None:
        value, label = spec.hline
        parts.append(
            f'<line x1="{left}" x2="{width - 16}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
            f'stroke="#c00" stroke-dasharray="4 3"/><text x="{width - 18}" '
            f'y="{y(value) - 4:.1f}" text-anchor="end" {_FONT} fill="#c00">'
            f"{escape(label)}</text>"
        )
    for index, s in enumerate(spec.series):
        color = PALETTE[index % len(PALETTE)]
        pts = [
            (x(a), y(b))
            for a, b in zip(s.xs, s.ys, strict=True)
            if math.isfinite(b) and (not spec.x_log or a > 0) and (not spec.y_log or b > 0)
        ]
        if s.dots:
            parts += [
                f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2" fill="{color}" fill-opacity="0.5"/>'
                for a, b in pts
            ]
        else:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            dash = ' stroke-dasharray="5 3"' if s.dashed else ""
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>'
            )
        parts.append(
            f'<text x="{left + 8 + 150 * index}" y="16" {_FONT} fill="{color}">'
            f"{escape(s.label)}</text>"
        )
    for marker in spec.markers:
        if spec.x_log and marker.x <= 0:
            continue
        px = x(marker.x)
        parts.append(
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="24" y2="{bottom}" stroke="#222" '
            f'stroke-dasharray="2 2"/><text x="{px + 4:.1f}" y="36" {_FONT}>'
            f"{escape(marker.label)}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def bars(
    items: Sequence[tuple[str, float]], *, unit: str, title: str = "", width: int = 640
) -> str:
    if not items:
        return ""
    label_w, row_h = 240, 22
    height = row_h * len(items) + 30
    high = max(value for _, value in items) * 1.1 or 1.0
    x = _Axis(0.0, high, label_w, width - 60)
    parts = [_svg_open(width, height, title)]
    for index, (label, value) in enumerate(items):
        cy = 8 + row_h * index
        parts.append(
            f'<text x="{label_w - 6}" y="{cy + 13}" text-anchor="end" {_FONT}>'
            f"{escape(label)}</text>"
        )
        parts.append(
            f'<rect x="{label_w}" y="{cy + 2}" width="{max(1.0, x(value) - label_w):.1f}" '
            f'height="15" fill="{PALETTE[index % len(PALETTE)]}"/>'
        )
        parts.append(
            f'<text x="{x(value) + 4:.1f}" y="{cy + 13}" {_FONT}>{_num(value)} '
            f"{escape(unit)}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _svg_open(width: int, height: int, title: str) -> str:
    label = f"<title>{escape(title)}</title>" if title else ""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">{label}'
    )
