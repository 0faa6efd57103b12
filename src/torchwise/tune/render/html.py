"""The tune report as one self-contained HTML page: inline CSS and SVG, no script, no CDN.

The page holds what the text report holds, plus the plots: step-time
distributions of every arm per stage, the phase split, the DataLoader
throughputs, the batch-size curve and the learning-rate curve. It opens from a
file, offline, in any browser, and attaches to a CI run or an issue as is.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from torchwise.tune.render import svg
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

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; max-width: 980px; margin: 2em auto; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
.meta { color: #555; }
pre.diff { background: #f7f7f7; padding: .6em .8em; overflow-x: auto; font-size: 12.5px; }
pre.diff .add { color: #176f2c; background: #e6ffec; display: block; }
pre.diff .del { color: #a40e26; background: #ffebe9; display: block; }
pre.diff .hunk { color: #6639ba; display: block; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: .2em 1em .8em; margin: 1em 0; }
.gain { font-weight: 600; color: #176f2c; }
.unmeasured { font-weight: normal; color: #555; font-style: italic; }
table { border-collapse: collapse; } td, th { padding: .25em .7em; border-bottom: 1px solid #eee;
text-align: left; vertical-align: top; }
ul.evidence { color: #444; font-size: 13px; }
.phases { display: flex; height: 22px; border-radius: 4px; overflow: hidden; margin: .4em 0; }
.phases div { color: white; font-size: 11px; padding: 3px 4px; white-space: nowrap;
overflow: hidden; }
"""


def _diff(text: str) -> str:
    rows = []
    for line in text.splitlines():
        css = ""
        if line.startswith("@@"):
            css = "hunk"
        elif line.startswith("+") and not line.startswith("+++"):
            css = "add"
        elif line.startswith("-") and not line.startswith("---"):
            css = "del"
        rows.append(f'<span class="{css}">{escape(line)}</span>' if css else escape(line))
    return '<pre class="diff">' + "\n".join(rows) + "</pre>"


def _phases(report: TuneReport) -> str:
    profile = report.profile
    if profile is None or profile.phase_total <= 0:
        return ""
    cells = []
    for index, (phase, seconds) in enumerate(profile.phases.items()):
        share = seconds / profile.phase_total
        color = svg.PALETTE[index % len(svg.PALETTE)]
        cells.append(
            f'<div style="width:{share * 100:.1f}%;background:{color}" '
            f'title="{phase} {share:.0%}">{phase} {share:.0%}</div>'
        )
    return '<div class="phases">' + "".join(cells) + "</div>"


def _stage_plots(report: TuneReport) -> list[str]:
    out = []
    for stage in report.search.stages:
        if stage.session is None:
            continue
        rows = [
            (
                "baseline" + (f" ({' + '.join(stage.incumbent)})" if stage.incumbent else ""),
                stage.session.baseline.times,
            )
        ]
        rows += [(name, arm.times) for name, arm in stage.session.arms.items()]
        title = f"Stage {stage.index}: step time per arm"
        out.append(f"<h3>{escape(title)}</h3>" + svg.distributions(rows, title=title))
    if report.search.combined is not None and report.search.confirmation is not None:
        session = report.search.confirmation
        rows = [("baseline", session.baseline.times)]
        rows += [(name, arm.times) for name, arm in session.arms.items()]
        out.append(
            "<h3>Confirmation: all recommendations together</h3>"
            + svg.distributions(rows, title="confirmation")
        )
    return out


def _batch_size_plot(report: TuneReport) -> str:
    result = report.batch_size
    if result is None:
        return ""
    ok = [r for r in result.probes if r.ok and r.peak is not None]
    if not ok:
        return ""
    sizes = [float(r.size) for r in ok]
    peaks = [r.peak / 2**20 for r in ok if r.peak is not None]
    budget = result.budget / 2**20
    # A budget far above every peak would flatten the curve: name it instead of drawing it.
    on_chart = budget <= 4 * max(peaks)
    label = "peak memory (MiB)" + ("" if on_chart else f"; budget {budget:,.0f} MiB, off the chart")
    memory = svg.curves(
        svg.CurveSpec(
            [svg.Series(label, sizes, peaks)],
            "batch size",
            "MiB",
            x_log=True,
            hline=(budget, "budget") if on_chart else None,
            markers=[svg.Marker(result.pick, f"pick {result.pick}")] if result.pick else [],
            x_format=lambda v: f"{v:g}",
            x_ticks=sizes,
        )
    )
    rates = [(float(r.size), r.samples_per_s) for r in ok if r.samples_per_s]
    speed = ""
    if rates:
        speed = svg.curves(
            svg.CurveSpec(
                [svg.Series("samples/s", [a for a, _ in rates], [b for _, b in rates if b])],
                "batch size",
                "samples/s",
                x_log=True,
                x_format=lambda v: f"{v:g}",
                x_ticks=[a for a, _ in rates],
            )
        )
    return memory + speed


def _lr_plot(report: TuneReport) -> str:
    lr = report.lr
    if lr is None or not lr.lrs:
        return ""
    a = lr.analysis
    markers = [svg.Marker(a.pick, f"pick {a.pick:.2g}")] if a.pick else []
    return svg.curves(
        svg.CurveSpec(
            [
                svg.Series("loss", lr.lrs, lr.losses, dots=True),
                svg.Series("smoothed", lr.lrs, a.smoothed),
            ],
            "learning rate",
            "loss",
            x_log=True,
            markers=markers,
            x_format=lambda v: f"{v:.0e}",
        )
    )


def render_html(report: TuneReport) -> str:
    body: list[str] = []
    w = report.workload
    body.append(f"<h1>torchwise tune: {escape(report.name)}</h1>")
    body.append(
        f'<p class="meta">{escape(report.environment.line())}<br>'
        f"batch {escape(', '.join(w['batch']))}; loss {escape(w['loss'])}; "
        f"optimizer <code>{escape(w['optimizer'])}</code></p>"
    )
    body.append("<h2>Baseline</h2><ul>")
    body += [f"<li>{escape(line)}</li>" for line in baseline_lines(report)]
    body.append("</ul>" + _phases(report))
    body.append("<h2>Recommendations</h2>")
    recs = report.recommendations
    if not recs:
        body.append("<p>None: no knob made the step significantly faster on this machine.</p>")
    else:
        body.append(f'<p class="meta">Code: {escape(code_heading(report))}.</p>')
    for index, (trial, text) in enumerate(zip(recs, report.recommendation_diffs(), strict=True), 1):
        assert trial.comparison is not None
        on_top = f" on top of {' + '.join(trial.on_top_of)}" if trial.on_top_of else ""
        body.append(
            f'<div class="card"><h3>{index}. {escape(trial.knob.title)}: '
            f'<span class="gain">{escape(fmt_gain(trial.comparison))}</span>'
            f"{escape(on_top)}</h3><p>{escape(trial.knob.why)}</p>"
            '<ul class="evidence">'
            + "".join(f"<li>{escape(line)}</li>" for line in evidence(trial).splitlines())
            + "</ul>"
            + _diff(text)
            + "</div>"
        )
    if len(recs) > 1:
        measured, line = combined_line(report)
        # Only a measured gain gets the result's style; "not measured" is a note.
        head = (
            f'All together: <span class="gain">{escape(line)}</span>'
            if measured
            else f'Together: <span class="unmeasured">{escape(line)}</span>'
        )
        body.append(f'<div class="card"><h3>{head}</h3>' + _diff(report.combined_diff()) + "</div>")
    body.append("<h2>Step-time distributions</h2>")
    body += _stage_plots(report)
    rows = [
        (t.knob.title, not_recommended_line(t).split(": ", 1)[1]) for t in report.not_recommended()
    ]
    rows += [
        (t.knob.title, "trade-off: " + tradeoff_line(report, t).split(": ", 1)[1])
        for t in report.tradeoffs()
    ]
    rows += [
        (t.knob.title, broken_line(t).split(": ", 1)[1])
        for t in [*report.broken(), *report.not_applicable()]
    ]
    rows += [(k.title, f"not tried: {reason}") for k, reason in report.skipped]
    if rows:
        body.append("<h2>Everything else</h2><table><tr><th>knob</th><th>result</th></tr>")
        body += [f"<tr><td>{escape(a)}</td><td>{escape(b)}</td></tr>" for a, b in rows]
        body.append("</table>")
    if report.loader_scan is not None:
        body.append("<h2>DataLoader</h2><ul>")
        body += [
            f"<li>{escape(line.strip())}</li>" for line in loader_lines(report)[1:] if line.strip()
        ]
        body.append("</ul>")
        items = [(s.describe(), r.median_s * 1e3) for s, r in report.loader_scan.results.items()]
        body.append(svg.bars(sorted(items, key=lambda item: item[1]), unit="ms/batch"))
    if report.batch_size is not None:
        body.append("<h2>Batch size</h2><ul>")
        body += [f"<li>{escape(line.strip())}</li>" for line in batch_size_lines(report.batch_size)]
        body.append("</ul>" + _batch_size_plot(report))
    if report.lr is not None:
        body.append("<h2>Learning rate</h2><ul>")
        body += [f"<li>{escape(line.strip())}</li>" for line in lr_lines(report.lr)[1:]]
        body.append("</ul>" + _lr_plot(report))
    body.append("<h2>Method</h2>")
    body += [f"<p>{escape(line.strip())}</p>" for line in method_lines(report)[1:]]
    title = escape(f"torchwise tune: {report.name}")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
