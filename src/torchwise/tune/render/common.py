"""The lines every format of the tune report shares: evidence, baseline, trials, finders, method.

Each function returns plain text lines; the text, Markdown and HTML renderers
lay them out. A result that was not measured is a sentence, never a figure:
:func:`combined_line` returns it as such and the renderers style only measured
gains as results.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from torchwise.tune.batch_size import VERIFY_STEPS, BatchSizeResult
from torchwise.tune.lr_range import LRResult
from torchwise.tune.stats import Comparison, format_confidence
from torchwise.units import duration, nbytes

if TYPE_CHECKING:
    from torchwise.tune.report import TuneReport
    from torchwise.tune.trials import Trial


def fmt_gain(comparison: Comparison) -> str:
    """``1.42x faster (99.94% CI 1.35x-1.50x)`` or ``1.20x slower (99.94% CI 1.05x-1.43x)``.

    The interval reads in the headline's direction: a slowdown's as slowdowns
    (time ratios), a speedup's as speedups, so "1.15x slower (CI 0.70x-0.95x)"
    cannot be misread as a range of slowdowns below 1.
    """
    level = format_confidence(comparison.confidence)
    speedup = comparison.speedup
    if speedup >= 1:
        low = 1 / comparison.ci_high if comparison.ci_high > 0 else math.inf
        high = 1 / comparison.ci_low if comparison.ci_low > 0 else math.inf
        word, value = "faster", speedup
    else:
        low, high, word, value = comparison.ci_low, comparison.ci_high, "slower", 1 / speedup
    ci = f"{level} CI {low:.2f}x-{high:.2f}x" if math.isfinite(high) else f"{level} CI open"
    return f"{value:.2f}x {word} ({ci})"


def indent(text: str, prefix: str = "    ") -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(True))


def evidence(trial: Trial) -> str:
    parts = []
    if trial.result is not None and trial.baseline is not None and trial.comparison is not None:
        lo, hi = trial.result.iqr_s
        blo, bhi = trial.baseline.iqr_s
        parts.append(
            f"step {duration(trial.result.median_s)} (IQR {duration(lo)}-{duration(hi)}) vs "
            f"{duration(trial.baseline.median_s)} (IQR {duration(blo)}-{duration(bhi)}), "
            f"{trial.comparison.rounds} interleaved rounds"
        )
    if trial.first_step_s is not None and trial.knob.id == "compile":
        parts.append(f"first step (compile) {duration(trial.first_step_s)}")
    if trial.check is not None:
        parts.append(
            "correct: " + trial.check.summary() if trial.check.ok else trial.check.summary()
        )
    return "\n".join(parts)


def combined_line(report: TuneReport) -> tuple[bool, str]:
    """(measured, text) for the recommendations together against the baseline."""
    combined = report.search.combined
    if combined is not None:
        return True, f"{fmt_gain(combined)} against the baseline ({combined.rounds} rounds)"
    return False, (
        f"not measured against the baseline: {report.search.combined_not_measured}. "
        "Each gain above was measured on top of the ones before it"
    )


def code_heading(report: TuneReport) -> str:
    """What the diffs are against: the user's script, or a pattern."""
    if report.script is not None:
        return f"the change to {report.script.path}"
    return (
        "the change, as a pattern against the canonical loop with your names "
        "(--train-script FILE diffs your own loop)"
    )


def memory_line(report: TuneReport) -> str | None:
    m = report.memory
    if m is None:
        return None
    line = (
        f"peak memory {nbytes(m.peak)} (resident {nbytes(m.resident)} + "
        f"{nbytes(m.transient)} during the step; {m.source})"
    )
    if m.rss_peak is not None:
        line += f"; process RSS peak {nbytes(m.rss_peak)}"
    if m.reserved is not None:
        line += f"; reserved {nbytes(m.reserved)}"
    return line


def baseline_lines(report: TuneReport) -> list[str]:
    base = report.baseline
    lines = []
    if base is not None:
        lo, hi = base.iqr_s
        rate = report.throughput(base.median_s)
        per_s = f" = {rate:,.0f} samples/s" if rate else ""
        lines.append(
            f"step {duration(base.median_s)} median (IQR {duration(lo)}-{duration(hi)}, "
            f"{len(base.samples)} samples of {base.steps_per_sample} step(s)){per_s}"
        )
    profile = report.profile
    if profile is not None:
        total = profile.phase_total or 1.0
        lines.append(
            " | ".join(
                f"{phase} {duration(s)} ({s / total:.0%})" for phase, s in profile.phases.items()
            )
        )
    memory = memory_line(report)
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


def not_recommended_line(trial: Trial) -> str:
    c = trial.comparison
    assert c is not None
    on_top = f" [on top of {' + '.join(trial.on_top_of)}]" if trial.on_top_of else ""
    if c.verdict.value == "no significant difference":
        return f"{trial.knob.title}: no significant difference ({c.reason}){on_top}"
    return f"{trial.knob.title}: {fmt_gain(c)}, {c.verdict.value}{on_top}"


def tradeoff_line(report: TuneReport, trial: Trial) -> str:
    stage = next((s for s in report.search.stages if trial in s.trials), None)
    base_memory = stage.baseline_memory if stage is not None else None
    on_top = f" (on top of {' + '.join(trial.on_top_of)})" if trial.on_top_of else ""
    parts = [trial.knob.title + on_top + ":"]
    if trial.memory is not None and base_memory is not None and base_memory.peak:
        change = trial.memory.peak / base_memory.peak - 1
        parts.append(
            f"peak memory {change:+.0%} ({nbytes(base_memory.peak)} -> {nbytes(trial.memory.peak)})"
        )
    if trial.comparison is not None:
        parts.append(f"step {fmt_gain(trial.comparison)}")
    return " ".join(parts)


def broken_line(trial: Trial) -> str:
    """A knob that broke the step or cannot apply: its status and why."""
    why = trial.not_applicable or trial.error or (trial.check.summary() if trial.check else "")
    return f"{trial.knob.title}: {trial.status.value}: {why}"


def loader_lines(report: TuneReport) -> list[str]:
    scan = report.loader_scan
    if scan is None:
        return []
    lines = ["DataLoader"]
    user = scan.seconds_per_batch(scan.user)
    lines.append(f"  yours ({scan.user.describe()}): {duration(user)} per batch")
    ordered = sorted(scan.results.items(), key=lambda item: item[1].median_s)
    for settings, result in ordered:
        if settings == scan.user:
            continue
        c = result.comparison
        verdict = f", {fmt_gain(c)}" if c is not None else ""
        lines.append(f"  {settings.describe()}: {duration(result.median_s)} per batch{verdict}")
    bound = report.input_bound()
    if bound is not None:
        share = bound["waiting_share"]
        if bound["input_bound"]:
            lines.append(
                f"  input-bound: loading a batch takes {duration(bound['loader_s_per_batch'])}, "
                f"computing the step {duration(bound['compute_s_per_step'])}: the step waits for "
                f"data {share:.0%} of the time with your settings"
            )
        else:
            lines.append(
                f"  not input-bound: loading {duration(bound['loader_s_per_batch'])} per batch "
                f"vs {duration(bound['compute_s_per_step'])} of compute"
            )
        if bound["input_bound_with_best"]:
            lines.append(
                "  still input-bound with the best settings: make loading itself "
                "cheaper (cache decoded samples, lighter transforms)"
            )
    return [*lines, ""]


def batch_size_lines(result: BatchSizeResult) -> list[str]:
    """A heading, one row per size (one step time each), the verification, the pick and why."""
    time_budget = (
        f", {duration(result.time_budget_s)} of --budget"
        if result.time_budget_s is not None
        else ""
    )
    lines = [
        f"Batch size (memory budget {nbytes(result.budget)} from {result.budget_source}, "
        f"{result.headroom:.0%} headroom"
        + (f", capped at {result.cap}" if result.cap else "")
        + f"{time_budget}; took {duration(result.elapsed_s)})"
    ]
    for r in result.probes:
        if r.ok:
            rate = f", {r.samples_per_s:,.0f} samples/s" if r.samples_per_s else ""
            own = " (the baseline's)" if r.steps == 0 and result.start_step_from_baseline else ""
            lines.append(
                f"  {r.size:>6}: peak {nbytes(r.peak)}, step {duration(r.seconds_per_step)}"
                f"{own}{rate}"
            )
        else:
            lines.append(f"  {r.size:>6}: {r.error}")
    if result.stop:
        lines.append(f"  stopped at {result.stop}")
    for v in result.verifications:
        state = "passed" if v.ok else f"failed ({v.error})"
        lines.append(f"  {VERIFY_STEPS}-step run at {v.size}: {state}")
    lines.append(
        f"  pick: {result.pick}: {result.reason}" if result.pick else f"  no pick: {result.reason}"
    )
    return lines


def lr_lines(result: LRResult) -> list[str]:
    a = result.analysis
    lines = [f"Learning rate (range test over {len(result.lrs)} steps on {result.data})"]
    if a.pick is not None:
        lines.append(f"  pick {a.pick:.3g} ({a.confidence} confidence): {a.reason}")
    else:
        lines.append(f"  no pick: {a.reason}")
    if a.min_lr is not None:
        lines.append(f"  lowest smoothed loss at lr {a.min_lr:.3g}")
    if result.diverged_at is not None:
        lines.append(f"  diverged at lr {result.diverged_at:.3g}")
    return lines


def method_lines(report: TuneReport) -> list[str]:
    from torchwise.tune.session import look_confidence

    s = report.session
    stages = len(report.search.stages)
    return [
        "Method",
        "  Each knob ran on a private copy of the model and trained a few steps from the "
        "baseline's weights; its losses had to stay within what its precision change explains "
        f"(twins of the fp32 baseline; {report.search.check_mode}). It was then timed in "
        f"interleaved pairs (baseline and knob back to back, order randomised) with "
        f"{s.warmup_steps} warm-up steps. Verdict: Hodges-Lehmann estimate of the paired "
        f"time ratio and its Wilcoxon signed-rank interval, {format_confidence(s.confidence)} "
        f"overall ({format_confidence(look_confidence(s))} per look); faster or slower "
        f"needs the interval to exclude 1 and an effect of at least {s.min_effect:.0%}.",
        f"  {stages} stage(s); {report.elapsed_s:.0f} s in all (budget {report.budget_s:.0f} s "
        "for the timing sessions).",
    ]
