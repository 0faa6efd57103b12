"""Renderers for review results: one module per ``--format``.

Each module exposes ``render(report: ReviewReport, options: RenderOptions) -> str``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol

from torchwise.review.runner import ReviewReport

FORMATS = ("text", "json", "sarif", "github", "markdown")


@dataclass(frozen=True)
class RenderOptions:
    color: bool = False
    show_fixes: bool = True  # mention available fixes in text output
    statistics: bool = True  # the per-code summary after text output
    #: Models the project names in [tool.torchwise.models] (name -> target), which
    #: the written review's testing recommendations use first.
    models: tuple[tuple[str, str], ...] = ()


class _Renderer(Protocol):
    def __call__(self, report: ReviewReport, options: RenderOptions) -> str: ...


def render(report: ReviewReport, fmt: str, options: RenderOptions | None = None) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    module = importlib.import_module(f"torchwise.review.output.{fmt}")
    renderer: _Renderer = module.render
    return renderer(report, options or RenderOptions())
