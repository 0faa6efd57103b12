"""The tune report's renderings: text, Markdown, self-contained HTML, and JSON.

``render(report, fmt)`` is the one entry point; the shared lines live in
:mod:`torchwise.tune.render.common`, the charts in :mod:`torchwise.tune.render.svg`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchwise.tune.report import TuneReport

FORMATS = ("text", "json", "markdown", "html")


def render(report: TuneReport, fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2) + "\n"
    if fmt == "markdown":
        from torchwise.tune.render.markdown import render_markdown

        return render_markdown(report)
    if fmt == "html":
        from torchwise.tune.render.html import render_html

        return render_html(report)
    if fmt == "text":
        from torchwise.tune.render.text import render_text

        return render_text(report)
    raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
