"""The tune report as Markdown, for an issue or a pull request: the text report's content."""

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
    loader_lines,
    lr_lines,
    method_lines,
    not_recommended_line,
    tradeoff_line,
)

if TYPE_CHECKING:
    from torchwise.tune.report import TuneReport


def render_markdown(report: TuneReport) -> str:
    out: list[str] = [f"# torchwise tune: {report.name}", ""]
    w = report.workload
    out.append(f"Measured on {report.environment.line()}.")
    out.append(
        f"Batch {', '.join(f'`{b}`' for b in w['batch'])}; loss {w['loss']}; "
        f"optimizer `{w['optimizer']}`."
    )
    out += ["", "## Baseline", ""]
    out += [f"- {line}" for line in baseline_lines(report)]
    out += ["", "## Recommendations", ""]
    recs = report.recommendations
    if not recs:
        out.append("None: no knob made the step significantly faster on this machine.")
    else:
        out += [f"Code: {code_heading(report)}.", ""]
    for index, (trial, text) in enumerate(zip(recs, report.recommendation_diffs(), strict=True), 1):
        assert trial.comparison is not None
        on_top = f" (on top of {' + '.join(trial.on_top_of)})" if trial.on_top_of else ""
        out += [f"### {index}. {trial.knob.title}: {fmt_gain(trial.comparison)}{on_top}", ""]
        out += [trial.knob.why, ""]
        out += [f"- {line}" for line in evidence(trial).splitlines()]
        out += ["", "```diff", text.rstrip(), "```", ""]
    if len(recs) > 1:
        measured, line = combined_line(report)
        # Only a measured gain is a heading; "not measured" is a plain sentence.
        out += [f"### All together: {line}" if measured else f"Together: {line}.", ""]
        out += ["```diff", report.combined_diff().rstrip(), "```", ""]
    rows = report.not_recommended()
    if rows or report.tradeoffs():
        out += ["## Measured, not recommended", "", "| knob | result |", "|---|---|"]
        out += [f"| {t.knob.title} | {not_recommended_line(t).split(': ', 1)[1]} |" for t in rows]
        out += [
            f"| {t.knob.title} | trade-off: {tradeoff_line(report, t).split(': ', 1)[1]} |"
            for t in report.tradeoffs()
        ]
        out.append("")
    if report.broken():
        out += ["## Broke the step", ""]
        out += [f"- {broken_line(t)}" for t in report.broken()]
        out.append("")
    if report.skipped or report.not_applicable():
        out += ["## Not tried here", ""]
        out += [f"- {broken_line(t)}" for t in report.not_applicable()]
        out += [f"- {k.title}: {reason}" for k, reason in report.skipped]
        out.append("")
    loader = loader_lines(report)
    if loader:
        out += ["## DataLoader", ""] + [f"- {line.strip()}" for line in loader[1:] if line.strip()]
        out.append("")
    if report.batch_size is not None:
        rows_bs = batch_size_lines(report.batch_size)
        out += ["## Batch size", "", rows_bs[0], ""]
        out += [f"- {line.strip()}" for line in rows_bs[1:]] + [""]
    if report.lr is not None:
        out += ["## Learning rate", ""] + [f"- {line.strip()}" for line in lr_lines(report.lr)[1:]]
        out.append("")
    out += ["## Method", ""] + [line.strip() for line in method_lines(report)[1:]]
    return "\n".join(out).rstrip() + "\n"
