"""Inline SVG charts for the HTML report: plain strings, no script, no external files.

Every chart is a ``<svg>`` with a ``viewBox`` (it scales with the page), a
``<title>`` for screen readers, and all text escaped. Bar lengths are linear in
the value; a bar too short to see still gets one pixel so a non-zero value
never looks like zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

#: Status and severity colours, shared with the page's CSS badges.
COLORS: dict[str, str] = {
    "error": "#c62828",
    "warning": "#ef8f00",
    "info": "#1e88e5",
    "fail": "#c62828",
    "warn": "#ef8f00",
    "pass": "#2e7d32",
    "skip": "#9e9e9e",
    "safe": "#2e7d32",
    "unsafe": "#c62828",
    "bar": "#5c6bc0",
    "bar2": "#26a69a",
}

_WIDTH = 640
_ROW = 22
_LABEL = 190
_VALUE = 90


def _svg(height: int, title: str, body: list[str], css_class: str) -> str:
    return (
        f'<svg class="chart {css_class}" viewBox="0 0 {_WIDTH} {height}" width="100%" '
        f'role="img" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
        + "".join(body)
        + "</svg>"
    )


def _label(x: float, y: float, text: str, *, anchor: str = "start", muted: bool = False) -> str:
    fill = "#555" if muted else "#222"
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="12" fill="{fill}" text-anchor="{anchor}" '
        f'dominant-baseline="middle">{escape(text)}</text>'
    )


def _clip(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def stacked_bars(
    rows: Sequence[tuple[str, Mapping[str, int]]], keys: Sequence[str], title: str
) -> str:
    """One horizontal bar per row, split by ``keys`` (e.g. findings by family and severity)."""
    total_max = max([sum(counts.get(k, 0) for k in keys) for _, counts in rows] + [1])
    span = _WIDTH - _LABEL - _VALUE
    height = _ROW * len(rows) + 30
    body = []
    for index, (label, counts) in enumerate(rows):
        y = index * _ROW + 4
        body.append(_label(_LABEL - 8, y + 8, _clip(label), anchor="end"))
        x = float(_LABEL)
        for key in keys:
            value = counts.get(key, 0)
            if not value:
                continue
            width = max(1.0, span * value / total_max)
            body.append(
                f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="16" '
                f'fill="{COLORS.get(key, COLORS["bar"])}"><title>{escape(label)}: {value} '
                f"{escape(key)}</title></rect>"
            )
            x += width
        total = sum(counts.get(k, 0) for k in keys)
        body.append(_label(x + 6, y + 8, str(total), muted=True))
    legend_y = len(rows) * _ROW + 16
    x = float(_LABEL)
    for key in keys:
        color = COLORS.get(key, COLORS["bar"])
        body.append(f'<rect x="{x:.1f}" y="{legend_y - 5}" width="10" height="10" fill="{color}"/>')
        body.append(_label(x + 14, legend_y, key, muted=True))
        x += 90
    return _svg(height, title, body, "stacked")


def bars(rows: Sequence[tuple[str, float, str]], title: str, *, color: str = "bar") -> str:
    """Horizontal bars: (label, value, value as text), longest value scaled to the width."""
    top = max([value for _, value, _ in rows] + [1.0])
    span = _WIDTH - _LABEL - _VALUE
    height = _ROW * len(rows) + 6
    body = []
    for index, (label, value, text) in enumerate(rows):
        y = index * _ROW + 4
        width = max(1.0, span * value / top) if value > 0 else 0.0
        body.append(_label(_LABEL - 8, y + 8, _clip(label), anchor="end"))
        body.append(
            f'<rect x="{_LABEL}" y="{y}" width="{width:.1f}" height="16" fill="{COLORS[color]}">'
            f"<title>{escape(label)}: {escape(text)}</title></rect>"
        )
        body.append(_label(_LABEL + width + 6, y + 8, text, muted=True))
    return _svg(height, title, body, "bars")


def status_grid(items: Sequence[tuple[str, str]], title: str) -> str:
    """One tile per (label, status): doctor checks, coloured pass/warn/fail/skip."""
    columns = 3
    tile_w, tile_h = (_WIDTH - 10) / columns, 26
    rows = (len(items) + columns - 1) // columns
    body = []
    for index, (label, status) in enumerate(items):
        x = 5 + (index % columns) * tile_w
        y = 4 + (index // columns) * (tile_h + 4)
        color = COLORS.get(status, COLORS["skip"])
        body.append(
            f'<rect x="{x:.1f}" y="{y}" width="{tile_w - 6:.1f}" height="{tile_h}" rx="4" '
            f'fill="{color}" fill-opacity="0.15" stroke="{color}"/>'
        )
        body.append(_label(x + 8, y + tile_h / 2, f"{status.upper()}  {label}"))
    return _svg(rows * (tile_h + 4) + 8, title, body, "grid")


def verdict_bar(counts: Mapping[str, int], title: str) -> str:
    """One bar split by checkpoint verdict (safe, warning, unsafe, error), with a legend."""
    total = sum(counts.values()) or 1
    body = []
    x = 5.0
    span = _WIDTH - 10
    for verdict in ("safe", "warning", "unsafe", "error"):
        value = counts.get(verdict, 0)
        if not value:
            continue
        width = span * value / total
        color = COLORS.get(verdict, COLORS["fail"] if verdict == "error" else COLORS["bar"])
        body.append(
            f'<rect x="{x:.1f}" y="4" width="{width:.1f}" height="22" fill="{color}">'
            f"<title>{value} {escape(verdict)}</title></rect>"
        )
        if width > 60:
            body.append(
                f'<text x="{x + width / 2:.1f}" y="15" font-size="12" fill="#fff" '
                f'text-anchor="middle" dominant-baseline="middle">{value} {escape(verdict)}</text>'
            )
        x += width
    return _svg(32, title, body, "verdicts")
