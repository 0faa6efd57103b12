"""The project report's formats: text, json, markdown and a self-contained html page."""

from __future__ import annotations

from torchwise.project.render.markdown import knowledge_markdown, render_markdown
from torchwise.project.render.text import Paint, render_text
from torchwise.project.schema import ProjectReport

FORMATS = ("text", "json", "markdown", "html")


def render(report: ProjectReport, fmt: str, paint: Paint | None = None) -> str:
    """``report`` in one of :data:`FORMATS`; ``paint`` colours the text format."""
    if fmt == "json":
        return report.model_dump_json(indent=2) + "\n"
    if fmt == "markdown":
        return render_markdown(report)
    if fmt == "html":
        from torchwise.project.render.html import render_html

        return render_html(report)
    return render_text(report, paint) if paint is not None else render_text(report)


__all__ = ["FORMATS", "knowledge_markdown", "render"]
