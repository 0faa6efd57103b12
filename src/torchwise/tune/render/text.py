"""The tune report as plain text: reads top to bottom like an expert's note.

What was measured where, the baseline, the recommendations with their code
change and evidence, then everything else that was measured, what broke or did
not apply, the loader, the finders, and the method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchwise.tune.render.common import (
    baseline_lines,
    batch_size_lines,
    broken_line,
    code_heading,
    combined_line,
    evidence,
    fmt_gain,
    indent,
    loader_lines,
    lr_lines,
    method_lines,
    not_recommended_line,
    tradeoff_line,
)

if TYPE_CHECKING:
    from torchwise.tune.report import TuneReport


def render_text(report: TuneReport) -> str:
    out: list[str] = []
    w = report.workload
    out.append(f"torchwise tune: {report.name} on {report.environment.line()}")
    out.append(
        f"batch {', '.join(w['batch'])}; loss {w['loss']}; optimizer {w['optimizer']}"
        + (f"; loader {w['loader']}" if w.get("loader") else "")
    )
    out.append("")
    out.append("Baseline")
    out += ["  " + line for line in baseline_lines(report)]
    out.append("")
    recs = report.recommendations
    if recs:
        out.append("Recommendations (measured on this machine, largest gain first)")
        out.append(f"  Code: {code_heading(report)}")
        for index, (trial, text) in enumerate(
            zip(recs, report.recommendation_diffs(), strict=True), 1
        ):
            assert trial.comparison is not None
            on_top = f" on top of {' + '.join(trial.on_top_of)}" if trial.on_top_of else ""
            out.append(f"  {index}. {trial.knob.title}: {fmt_gain(trial.comparison)}{on_top}")
            out.append(indent(trial.knob.why, "     "))
            out.append(indent(evidence(trial), "     "))
            out.append(indent(text.rstrip(), "     "))
        if len(recs) > 1:
            measured, line = combined_line(report)
            out.append(f"  All together: {line}" if measured else f"  Together: {line}")
            out.append(indent(report.combined_diff().rstrip(), "     "))
    else:
        out.append(
            "Recommendations: none. No knob made the step significantly faster on this machine."
        )
    out.append("")
    tradeoffs = report.tradeoffs()
    if tradeoffs:
        out.append("Trade-offs (memory for time)")
        out += ["  " + tradeoff_line(report, t) for t in tradeoffs]
        out.append("")
    rest = report.not_recommended()
    if rest:
        out.append("Measured, not recommended")
        out += ["  " + not_recommended_line(t) for t in rest]
        out.append("")
    broken = report.broken()
    if broken:
        out.append("Broke the step (reported, never recommended)")
        out += ["  " + broken_line(t) for t in broken]
        out.append("")
    not_applicable = report.not_applicable()
    if report.skipped or not_applicable:
        out.append("Not tried here")
        out += ["  " + broken_line(t) for t in not_applicable]
        out += [f"  {k.title}: {reason}" for k, reason in report.skipped]
        out.append("")
    out += loader_lines(report)
    if report.batch_size is not None:
        out += [*batch_size_lines(report.batch_size), ""]
    if report.lr is not None:
        out += [*lr_lines(report.lr), ""]
    out += method_lines(report)
    return "\n".join(out).rstrip() + "\n"
