"""Text and Markdown renderings of a :class:`~torchwise.tune.report.TuneReport`.

Both read top to bottom like an expert's note: what was measured where, the
baseline, the recommendations with their diffs and evidence, then everything
else that was measured, the loader, the finders, and the method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchwise.tune.report import fmt_bytes, fmt_gain, fmt_time
from torchwise.tune.stats import format_confidence

if TYPE_CHECKING:
    from torchwise.tune.report import TuneReport
    from torchwise.tune.search import Trial


def _indent(text: str, prefix: str = "    ") -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(True))


def _evidence(trial: Trial) -> str:
    parts = []
    if trial.result is not None and trial.baseline is not None and trial.comparison is not None:
        lo, hi = trial.result.iqr_s
        blo, bhi = trial.baseline.iqr_s
        parts.append(
            f"step {fmt_time(trial.result.median_s)} (IQR {fmt_time(lo)}-{fmt_time(hi)}) vs "
            f"{fmt_time(trial.baseline.median_s)} (IQR {fmt_time(blo)}-{fmt_time(bhi)}), "
            f"{trial.comparison.rounds} interleaved rounds"
        )
    if trial.first_step_s is not None and trial.knob.id == "compile":
        parts.append(f"first step (compile) {fmt_time(trial.first_step_s)}")
    if trial.check is not None:
        parts.append(
            "correct: " + trial.check.summary() if trial.check.ok else trial.check.summary()
        )
    return "\n".join(parts)


def _memory_line(report: TuneReport) -> str | None:
    m = report.memory
    if m is None:
        return None
    line = (
        f"peak memory {fmt_bytes(m.peak)} (resident {fmt_bytes(m.resident)} + "
        f"{fmt_bytes(m.transient)} during the step; {m.source})"
    )
    if m.rss_peak is not None:
        line += f"; process RSS peak {fmt_bytes(m.rss_peak)}"
    if m.reserved is not None:
        line += f"; reserved {fmt_bytes(m.reserved)}"
    return line


def _baseline_lines(report: TuneReport) -> list[str]:
    base = report.baseline
    lines = []
    if base is not None:
        lo, hi = base.iqr_s
        rate = report._throughput(base.median_s)
        per_s = f" = {rate:,.0f} samples/s" if rate else ""
        lines.append(
            f"step {fmt_time(base.median_s)} median (IQR {fmt_time(lo)}-{fmt_time(hi)}, "
            f"{len(base.samples)} samples of {base.steps_per_sample} step(s)){per_s}"
        )
    profile = report.profile
    if profile is not None:
        total = profile.phase_total or 1.0
        lines.append(
            " | ".join(
                f"{phase} {fmt_time(s)} ({s / total:.0%})" for phase, s in profile.phases.items()
            )
        )
    memory = _memory_line(report)
    if memory:
        lines.append(memory)
    if profile is not None and profile.top_ops:
        ops = ", ".join(
            f"{op.name.removeprefix('aten::')} {op.share:.0%}" for op in profile.top_ops[:6]
        )
        lines.append(f"top operators ({profile.time_column} time): {ops}")
    if profile is not None:
        if profile.syncs:
            for sync in profile.syncs:
                where = f" at {', '.join(sync.where[:3])}" if sync.where else ""
                lines.append(
                    f"host-device sync: {sync.op} {sync.per_step:g}/step ({sync.cause}){where}"
                )
        else:
            lines.append("host-device syncs: none in the step")
        if profile.cuda_syncs is not None:
            lines.append(
                f"torch.cuda sync debug mode: {profile.cuda_syncs} synchronisation(s) per step"
            )
    return lines


def _not_recommended_line(trial: Trial) -> str:
    c = trial.comparison
    assert c is not None
    on_top = f" [on top of {' + '.join(trial.on_top_of)}]" if trial.on_top_of else ""
    if c.verdict.value == "no significant difference":
        return f"{trial.knob.title}: no significant difference ({c.reason}){on_top}"
    return f"{trial.knob.title}: {fmt_gain(c)}, {c.verdict.value}{on_top}"


def _tradeoff_line(report: TuneReport, trial: Trial) -> str:
    stage = next((s for s in report.search.stages if trial in s.trials), None)
    base_memory = stage.baseline_memory if stage is not None else None
    on_top = f" (on top of {' + '.join(trial.on_top_of)})" if trial.on_top_of else ""
    parts = [trial.knob.title + on_top + ":"]
    if trial.memory is not None and base_memory is not None and base_memory.peak:
        change = trial.memory.peak / base_memory.peak - 1
        parts.append(
            f"peak memory {change:+.0%} ({fmt_bytes(base_memory.peak)} -> "
            f"{fmt_bytes(trial.memory.peak)})"
        )
    if trial.comparison is not None:
        parts.append(f"step {fmt_gain(trial.comparison)}")
    return " ".join(parts)


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
    out += ["  " + line for line in _baseline_lines(report)]
    out.append("")
    recs = report.recommendations
    if recs:
        out.append("Recommendations (measured on this machine, largest gain first)")
        for index, (trial, text) in enumerate(
            zip(recs, report.recommendation_diffs(), strict=True), 1
        ):
            assert trial.comparison is not None
            on_top = f" on top of {' + '.join(trial.on_top_of)}" if trial.on_top_of else ""
            out.append(f"  {index}. {trial.knob.title}: {fmt_gain(trial.comparison)}{on_top}")
            out.append(_indent(trial.knob.why, "     "))
            out.append(_indent(_evidence(trial), "     "))
            out.append(_indent(text.rstrip(), "     "))
        if len(recs) > 1:
            out.append(f"  All together: {report.combined_summary()}")
            out.append(_indent(report.combined_diff().rstrip(), "     "))
    else:
        out.append(
            "Recommendations: none. No knob made the step significantly faster on this machine."
        )
    out.append("")
    tradeoffs = report.tradeoffs()
    if tradeoffs:
        out.append("Trade-offs (memory for time)")
        out += ["  " + _tradeoff_line(report, t) for t in tradeoffs]
        out.append("")
    rest = report.not_recommended()
    if rest:
        out.append("Measured, not recommended")
        out += ["  " + _not_recommended_line(t) for t in rest]
        out.append("")
    broken = report.broken()
    if broken:
        out.append("Broke the step (reported, never recommended)")
        for t in broken:
            problem = t.error if t.error is not None else (t.check.summary() if t.check else "")
            out.append(f"  {t.knob.title}: {t.status}: {problem}")
        out.append("")
    if report.skipped:
        out.append("Not tried here")
        out += [f"  {k.title}: {reason}" for k, reason in report.skipped]
        out.append("")
    out += _loader_lines(report)
    if report.batch_size is not None:
        out += [*report.batch_size.text_lines(), ""]
    if report.lr is not None:
        out += [*report.lr.text_lines(), ""]
    out += _method_lines(report)
    return "\n".join(out).rstrip() + "\n"


def _loader_lines(report: TuneReport) -> list[str]:
    scan = report.loader_scan
    if scan is None:
        return []
    lines = ["DataLoader"]
    user = scan.seconds_per_batch(scan.user)
    lines.append(f"  yours ({scan.user.describe()}): {fmt_time(user)} per batch")
    ordered = sorted(scan.results.items(), key=lambda item: item[1].median_s)
    for settings, result in ordered:
        if settings == scan.user:
            continue
        c = result.comparison
        verdict = f", {fmt_gain(c)}" if c is not None else ""
        lines.append(f"  {settings.describe()}: {fmt_time(result.median_s)} per batch{verdict}")
    bound = report.input_bound()
    if bound is not None:
        share = bound["waiting_share"]
        if bound["input_bound"]:
            lines.append(
                f"  input-bound: loading a batch takes {fmt_time(bound['loader_s_per_batch'])}, "
                f"computing the step {fmt_time(bound['compute_s_per_step'])}: the step waits for "
                f"data {share:.0%} of the time with your settings"
            )
        else:
            lines.append(
                f"  not input-bound: loading {fmt_time(bound['loader_s_per_batch'])} per batch "
                f"vs {fmt_time(bound['compute_s_per_step'])} of compute"
            )
        if bound["input_bound_with_best"]:
            lines.append(
                "  still input-bound with the best settings: make loading itself "
                "cheaper (cache decoded samples, lighter transforms)"
            )
    return [*lines, ""]


def _method_lines(report: TuneReport) -> list[str]:
    s = report.session
    from torchwise.tune.session import look_confidence

    stages = len(report.search.stages)
    return [
        "Method",
        f"  Each knob ran on a private copy of the model, checked against the baseline "
        f"for one step ({'train' if report.train_mode else 'eval'} mode), then timed in "
        f"interleaved pairs (baseline and knob back to back, order randomised) with "
        f"{s.warmup_steps} warm-up steps. Verdict: Hodges-Lehmann estimate of the paired "
        f"time ratio and its Wilcoxon signed-rank interval, {format_confidence(s.confidence)} "
        f"overall ({format_confidence(look_confidence(s))} per look); faster or slower "
        f"needs the interval to exclude 1 and an effect of at least {s.min_effect:.0%}.",
        f"  {stages} stage(s); {report.elapsed_s:.0f} s in all (budget {report.budget_s:.0f} s "
        "for the timing sessions).",
    ]


# -- Markdown ------------------------------------------------------------------------


def render_markdown(report: TuneReport) -> str:
    out: list[str] = [f"# torchwise tune: {report.name}", ""]
    w = report.workload
    out.append(f"Measured on {report.environment.line()}.")
    out.append(
        f"Batch {', '.join(f'`{b}`' for b in w['batch'])}; loss {w['loss']}; "
        f"optimizer `{w['optimizer']}`."
    )
    out += ["", "## Baseline", ""]
    out += [f"- {line}" for line in _baseline_lines(report)]
    out += ["", "## Recommendations", ""]
    recs = report.recommendations
    if not recs:
        out.append("None: no knob made the step significantly faster on this machine.")
    for index, (trial, text) in enumerate(zip(recs, report.recommendation_diffs(), strict=True), 1):
        assert trial.comparison is not None
        on_top = f" (on top of {' + '.join(trial.on_top_of)})" if trial.on_top_of else ""
        out += [f"### {index}. {trial.knob.title}: {fmt_gain(trial.comparison)}{on_top}", ""]
        out += [trial.knob.why, ""]
        out += [f"- {line}" for line in _evidence(trial).splitlines()]
        out += ["", "```diff", text.rstrip(), "```", ""]
    if len(recs) > 1:
        out += [
            f"### All together: {report.combined_summary()}",
            "",
            "```diff",
            report.combined_diff().rstrip(),
            "```",
            "",
        ]
    rows = report.not_recommended()
    if rows or report.tradeoffs():
        out += ["## Measured, not recommended", "", "| knob | result |", "|---|---|"]
        out += [f"| {t.knob.title} | {_not_recommended_line(t).split(': ', 1)[1]} |" for t in rows]
        out += [
            f"| {t.knob.title} | trade-off: {_tradeoff_line(report, t).split(': ', 1)[1]} |"
            for t in report.tradeoffs()
        ]
        out.append("")
    if report.broken():
        out += ["## Broke the step", ""]
        for t in report.broken():
            problem = t.error if t.error is not None else (t.check.summary() if t.check else "")
            out.append(f"- **{t.knob.title}**: {t.status}: {problem}")
        out.append("")
    if report.skipped:
        out += ["## Not tried here", ""]
        out += [f"- {k.title}: {reason}" for k, reason in report.skipped]
        out.append("")
    loader = _loader_lines(report)
    if loader:
        out += ["## DataLoader", ""] + [f"- {line.strip()}" for line in loader[1:] if line.strip()]
        out.append("")
    if report.batch_size is not None:
        out += (
            ["## Batch size", ""]
            + [f"- {line.strip()}" for line in report.batch_size.text_lines()[1:]]
            + [""]
        )
    if report.lr is not None:
        out += (
            ["## Learning rate", ""]
            + [f"- {line.strip()}" for line in report.lr.text_lines()[1:]]
            + [""]
        )
    method = _method_lines(report)
    out += ["## Method", ""] + [line.strip() for line in method[1:]]
    return "\n".join(out).rstrip() + "\n"
