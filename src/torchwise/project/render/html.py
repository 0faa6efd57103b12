"""The self-contained HTML report: one file, Jinja2 plus inline SVG, nothing fetched.

The page has no script, no web font, no CDN and no link to anything outside
itself, so it opens the same offline, in a CI artifact viewer or attached to a
ticket. Each part is a ``<section id=...>`` (knowledge, modules, review, models,
checkpoints, notes) so that tests and readers can jump to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchwise.deps import require
from torchwise.project.render import charts
from torchwise.project.render.common import (
    LAYOUT_LABELS,
    doctor_line,
    headline,
    merged_sections,
    model_line,
    module_role,
    package_text,
    plan_text,
    torch_text,
    verdict_text,
)
from torchwise.project.render.numbers import count, exact, nbytes, seconds
from torchwise.project.schema import LayerRow, ModelAudit, ProjectReport

TEMPLATES = Path(__file__).parent / "templates"
#: Layer rows drawn per chart (the rest are summed into one "other layers" bar).
MAX_BARS = 16


def _chart_layers(audit: ModelAudit) -> list[LayerRow]:
    """The layers worth a bar: the top-level children, with a child that holds most of
    the parameters (a ``backbone``, ``stages``, ``transformer``) replaced by its own
    children, so that the chart shows where the size is."""
    if audit.measure is None:
        return []
    layers = audit.measure.layers
    top = [layer for layer in layers if layer.depth == 1]
    total = sum(layer.params for layer in top) or 1
    chosen: list[LayerRow] = []
    for layer in top:
        inner = [c for c in layers if c.depth == 2 and c.name.startswith(layer.name + ".")]
        dominant = layer.params > 0.6 * total or len(top) < 3
        chosen.extend(inner if dominant and inner else [layer])
    if len(chosen) > MAX_BARS:
        rest = chosen[MAX_BARS - 1 :]
        chosen = [
            *chosen[: MAX_BARS - 1],
            LayerRow(
                name=f"{len(rest)} other layers",
                type="",
                depth=2,
                params=sum(layer.params for layer in rest),
                flops=sum(layer.flops for layer in rest),
                output_shapes=[],
            ),
        ]
    return chosen


def _model_view(audit: ModelAudit) -> dict[str, Any]:
    layers = _chart_layers(audit)
    view: dict[str, Any] = {
        "audit": audit,
        "line": model_line(audit),
        "doctor": doctor_line(audit),
        "params_chart": None,
        "flops_chart": None,
        "doctor_chart": None,
        "flagged": [],
    }
    if layers:
        view["params_chart"] = charts.bars(
            [(layer.name, layer.params, count(layer.params)) for layer in layers],
            f"parameters per layer of {audit.name}",
        )
        view["flops_chart"] = charts.bars(
            [(layer.name, layer.flops, count(layer.flops, "FLOPs")) for layer in layers],
            f"forward FLOPs per layer of {audit.name}",
            color="bar2",
        )
    if audit.doctor is not None:
        view["doctor_chart"] = charts.status_grid(
            [(check.id, check.status) for check in audit.doctor.checks],
            f"doctor checks of {audit.name}",
        )
        view["flagged"] = [c for c in audit.doctor.checks if c.status in ("fail", "warn")]
    return view


def render_html(report: ProjectReport) -> str:
    require("jinja2", purpose="torchwise project --format html")
    import jinja2
    from markupsafe import Markup

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters.update(count=count, nbytes=nbytes, exact=exact, seconds=seconds)
    review_chart = None
    if report.review is not None and report.review.by_family:
        rows = sorted(report.review.by_family.items(), key=lambda item: -sum(item[1].values()))
        review_chart = charts.stacked_bars(
            rows, ("error", "warning", "info"), "review findings by family and severity"
        )
    checkpoint_chart = None
    if report.checkpoints:
        verdicts: dict[str, int] = {}
        for entry in report.checkpoints:
            verdicts[entry.verdict] = verdicts.get(entry.verdict, 0) + 1
        checkpoint_chart = charts.verdict_bar(verdicts, "checkpoint verdicts")
    k = report.knowledge
    page = environment.get_template("report.html.j2").render(
        report=report,
        k=k,
        verdict=verdict_text(k),
        sections=merged_sections(report),
        headline=headline(report),
        torch=torch_text(k.torch),
        stack=[(p, package_text(p)) for p in k.stack],
        layout=[(label, getattr(k.layout, field)) for field, label in LAYOUT_LABELS],
        modules=[(m, module_role(m), plan_text(m.build)) for m in k.modules],
        review_chart=Markup(review_chart) if review_chart else None,
        checkpoint_chart=Markup(checkpoint_chart) if checkpoint_chart else None,
        models=[
            {
                key: Markup(value) if key.endswith("_chart") and value else value
                for key, value in view.items()
            }
            for view in map(_model_view, report.models)
        ],
    )
    return str(page)
