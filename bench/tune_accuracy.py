"""Is tune's recommendation the best setting? An exhaustive sweep of the CPU knobs decides.

For each workload of bench/tune_workloads.py (a conv net, a transformer, an MLP with a
slow loader), in one run:

1. ``tune()`` runs ``--repeats`` times as a user runs it (default budget, no finders),
   timed with the wall clock;
2. every combination of the CPU knobs tune tries is built (threads 2|1, channels_last
   for the conv net, bf16 autocast, optimizer for-loop|foreach|fused, zero_grad
   set_to_none True|False, and for the loader workload num_workers 0|1|2|4), together
   with each of tune's picks, twice (two independently built copies, alternate
   rounds timing one and the other), and measured round-robin: ``--rounds`` rounds,
   every combination once per round, the combinations of one thread count then the
   other's (each group, and each combination in it, in a shuffled order; 0.1 s of
   untimed steps at the switch, as tune settles), each sample a block of steps of
   about 20 ms (and at least twice the prefetch queue's depth of steps with loader
   workers: the rate they keep up, not a burst of ready batches) after the settle
   steps its settings need;
3. the best combination is the one with the lowest median step time over the first
   copies' rounds; a combination is in the sweep's **noise band** when the 95%
   signed-rank interval of its per-round time ratio to the best, over the second
   copies' rounds, includes 1 (the sweep cannot tell it from the best). Picked and
   judged on the same samples, the least of 24-96 medians is also the luckiest: every
   other combination's ratio to it carries that luck (four runs with one copy and all
   rounds named four different bests on the conv net, and put tune's same pick at
   1.017-1.152 of them). The shift between copies is printed: how far apart two
   builds of one combination land.

It prints, per workload, tune's pick and whether it is the best or in the band, the
time tune took against the sweep's, and every comparison tune made (a knob on top of
the knobs accepted before it) beside the same comparison read off the sweep: where the
sweep shows an effect over 20% (its interval beyond 0.8 or 1.25) tune's verdict should
say so, and where it shows none (within 5%, interval across 1) tune should say "no
significant difference". The cores the machine's other processes used are read in
every sweep round and in every tune stage (bench/_machine.py); a trial that ran
while they were idle (or held a core) all through its stage is compared with the
sweep's rounds at that same load, since a 2-thread step is another step when a job
holds one of two cores (both references are printed). ``torch.compile`` (opt-in, minutes
to compile each combination) and activation checkpointing (a memory knob) are not in
the sweep.

    python bench/tune_accuracy.py [--workloads conv,transformer,mlp-slow-loader]
                                  [--repeats 2] [--rounds 30] [--budget 60]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _machine import Others, regime
from torchwise.tune import TuneReport, tune
from torchwise.tune.arms import THREAD_SWITCH_SETTLE_S
from torchwise.tune.loader import LoaderSettings, LoaderSource, load_loader
from torchwise.tune.search import settings_for
from torchwise.tune.stats import hodges_lehmann, median
from torchwise.tune.step import StepSettings, TrainingStep
from torchwise.tune.step import Workload as StepWorkload
from tune_workloads import WORKLOADS, Workload, step_workload

OUT = Path(__file__).parent / ".out"


def key(settings: StepSettings, user_loader: LoaderSettings | None) -> tuple[Any, ...]:
    """A setting's identity with torch's defaults spelled out (threads, optimizer, loader)."""
    loader = settings.loader or user_loader
    return (
        settings.threads or torch.get_num_threads(),
        settings.channels_last,
        settings.autocast,
        settings.optimizer_impl or "for-loop",
        settings.set_to_none,
        None if loader is None else (loader.num_workers, loader.prefetch_factor),
    )


def label(settings: StepSettings, user_loader: LoaderSettings | None) -> str:
    threads, cl, autocast, impl, to_none, loader = key(settings, user_loader)
    parts = [f"threads={threads}"]
    if cl:
        parts.append("channels_last")
    if autocast:
        parts.append(autocast)
    parts.append(impl)
    if not to_none:
        parts.append("zero_grad(set_to_none=False)")
    if loader is not None:
        parts.append(f"workers={loader[0]}" + (f",prefetch={loader[1]}" if loader[1] else ""))
    return " ".join(parts)


def grid(conv: bool, loader: bool) -> list[StepSettings]:
    loaders: list[LoaderSettings | None] = [None]
    if loader:
        loaders += [LoaderSettings(w, False, True, None) for w in (1, 2, 4)]
    combos = itertools.product(
        (None, 1),
        (False, True) if conv else (False,),
        (None, "bf16"),
        (None, "foreach", "fused"),
        (True, False),
        loaders,
    )
    return [
        StepSettings(
            threads=t, channels_last=c, autocast=a, optimizer_impl=o, set_to_none=z, loader=ld
        )
        for t, c, a, o, z, ld in combos
    ]


#: Independently built copies of every combination; round r times copy r % COPIES.
COPIES = 2


@dataclass
class Arm:
    settings: StepSettings
    name: str
    #: COPIES independently built steps (their own parameters, optimizer state,
    #: allocations): a copy can be a few percent faster or slower than another of
    #: the same combination all through a sweep (three copies of the conv net's
    #: fused-optimizer step with set_to_none=False: 1.005, 1.034 and 1.036 of one
    #: reference copy, each interval about +-2%)
    copies: tuple[TrainingStep, ...]
    settle: int
    #: Steps timed in one sample (at least twice the prefetch queue with workers).
    steps: int = 1
    times: list[float] = field(default_factory=list)  # seconds per step, one per round

    def step(self, round_index: int) -> TrainingStep:
        return self.copies[round_index % len(self.copies)]


def sweep(
    workload: StepWorkload,
    settings: list[StepSettings],
    rounds: int,
    seed: int,
    user_loader: LoaderSettings | None,
) -> tuple[list[Arm], list[float], float]:
    """Round-robin over every setting.

    Returns the arms, the cores the machine's other processes used in each round
    (:mod:`_machine`), and the sweep's wall time.
    """
    started = time.perf_counter()
    arms = []
    for s in settings:
        copies = tuple(TrainingStep(workload, s) for _ in range(COPIES))
        settle = 1 + (s.loader.queue_depth if s.loader is not None else 0)
        arms.append(Arm(s, label(s, user_loader), copies, settle))
    for arm in arms:  # warm-up
        for copy in arm.copies:
            with copy.scope():
                copy.run(2)
    base = next(a for a in arms if a.settings == StepSettings()).copies[0]
    with base.scope():
        t0 = time.perf_counter()
        base.run(5)
        per_step = (time.perf_counter() - t0) / 5
    steps = max(1, math.ceil(0.02 / per_step))
    for arm in arms:
        # The settle steps drain the prefetch queue, but the workers refill it while
        # they run: a sample of a step or two after them times batches already
        # waiting (a burst), not the rate the workers keep up (2 workers at 20 ms a
        # batch measured 3.6 ms a step, below the 10 ms they can deliver). Twice the
        # queue's depth of steps measures the rate.
        loader = arm.settings.loader
        arm.steps = max(steps, 2 * loader.queue_depth if loader is not None else 0)
    rng = random.Random(seed)
    by_threads: dict[int, list[Arm]] = {}
    for arm in arms:
        by_threads.setdefault(arm.settings.threads or torch.get_num_threads(), []).append(arm)
    others: list[float] = []
    for round_index in range(rounds):
        reading = Others()
        # Each round runs the arms of one thread count, then the other's (groups
        # and arms in a shuffled order), and settles for tune's
        # THREAD_SWITCH_SETTLE_S at the switch: 2-thread steps right after
        # one-thread steps are slow for about 75 ms, and in a fully shuffled order
        # half of the 2-thread samples came right after a switch
        # (bench/tune_threads_ab.py). One switch a group costs 0.1 s a round where
        # a settle before every sample after a switch would cost 0.05 s a sample.
        groups = list(by_threads.values())
        rng.shuffle(groups)
        for group in groups:
            order = list(group)
            rng.shuffle(order)
            for index, arm in enumerate(order):
                step = arm.step(round_index)
                with step.scope():
                    if index == 0:
                        _settle_for(step, THREAD_SWITCH_SETTLE_S)
                    step.run(arm.settle)
                    t0 = time.perf_counter()
                    step.run(arm.steps)
                    arm.times.append((time.perf_counter() - t0) / arm.steps)
        others.append(reading.cores())
    return arms, others, time.perf_counter() - started


def _settle_for(step: TrainingStep, seconds: float) -> None:
    """Untimed steps until ``seconds`` have passed (at least one)."""
    deadline = time.perf_counter() + seconds
    step.run(1)
    while time.perf_counter() < deadline:
        step.run(1)


def versus(arm: Arm, best: Arm, rounds: list[int] | None = None) -> tuple[float, float, float]:
    """(ratio, low, high): the arm's per-round time over the best's, 95% signed-rank CI.

    Over ``rounds`` only when given (the rounds at one load).
    """
    pairs = list(zip(arm.times, best.times, strict=True))
    if rounds is not None:
        pairs = [pairs[r] for r in rounds]
    diffs = [math.log(a / b) for a, b in pairs]
    estimate, low, high = hodges_lehmann(diffs, 0.95)
    return math.exp(estimate), math.exp(low), math.exp(high)


#: Fewest sweep rounds at tune's load for a reference read at that load alone.
MIN_SAME_LOAD_ROUNDS = 8


def trial_effects(
    arms: list[Arm],
    user_loader: LoaderSettings | None,
    report: TuneReport,
    repeat: int,
    round_others: list[float],
    stage_others: dict[int, float],
) -> list[dict[str, Any]]:
    """Every trial tune ran, beside the same comparison read off the sweep.

    A trial compares (incumbent + knob) with the incumbent; the sweep measured both
    combinations, so its ratio is the reference for tune's verdict. Like with like:
    when the other processes were idle, or held a core, all through the stage the
    trial ran in, the reference is read off the sweep's rounds at that same load
    (when there are at least MIN_SAME_LOAD_ROUNDS of them). A 2-thread step is
    10-100x slower with a core held, so a reference taken minutes later over other
    rounds is another experiment (bench/_machine.py).
    """
    by_key = {key(a.settings, user_loader): a for a in arms}
    knobs = {t.knob.id: t.knob for t in report.trials}
    rows = []
    for trial in report.trials:
        if trial.knob.kind != "speed" or trial.comparison is None or trial.error is not None:
            continue
        incumbent = [knobs[k] for k in trial.on_top_of]
        arm = by_key.get(key(settings_for([*incumbent, trial.knob]), user_loader))
        base = by_key.get(key(settings_for(incumbent), user_loader))
        if arm is None or base is None:
            continue
        load = regime(stage_others[trial.stage]) if trial.stage in stage_others else None
        same = [r for r, cores in enumerate(round_others) if regime(cores) == load]
        at_load = load is not None and len(same) >= MIN_SAME_LOAD_ROUNDS
        ratio, low, high = versus(arm, base, same if at_load else None)
        if high < 0.8 or low > 1.25:
            truth = "over 20%"
        elif 0.95 <= ratio <= 1.05 and low <= 1 <= high:
            truth = "none"
        else:
            truth = "between"
        rows.append(
            {
                "repeat": repeat,
                "knob": trial.knob.id,
                "on_top_of": list(trial.on_top_of),
                "sweep_ratio": [ratio, low, high],
                "sweep_ratio_all_rounds": list(versus(arm, base)),
                "others_cores_at_tune": stage_others.get(trial.stage),
                "reference_rounds": f"{len(same)} at tune's load ({load})"
                if at_load
                else f"all {len(round_others)}",
                "truth": truth,
                "tune_ratio": trial.comparison.ratio,
                "verdict": trial.status,
            }
        )
    return rows


def agrees(row: dict[str, Any]) -> bool | None:
    """Whether tune's verdict matches the sweep's reference (None: no claim either way)."""
    ratio = row["sweep_ratio"][0]
    if row["truth"] == "over 20%":
        return bool(row["verdict"] == ("faster" if ratio < 1 else "slower"))
    if row["truth"] == "none":
        return bool(row["verdict"] == "no significant difference")
    return None


class StageLoad:
    """tune's progress lines, printed, and the other processes' cores in each stage."""

    def __init__(self) -> None:
        self.stage: int | None = None
        self.reading = Others()
        self.cores: dict[int, float] = {}

    def notify(self, line: str) -> None:
        print(f"    {line}", file=sys.stderr)
        if line.startswith(("stage ", "confirming", "profiling")):
            self.finish()
            self.stage = int(line.split()[1].rstrip(":")) if line.startswith("stage ") else None

    def finish(self) -> dict[int, float]:
        if self.stage is not None:
            self.cores[self.stage] = self.reading.cores()
            self.stage = None
        self.reading = Others()
        return self.cores


def run_workload(
    spec: Workload, repeats: int, rounds: int, budget: float, seed: int
) -> dict[str, Any]:
    source: LoaderSource | None = load_loader(spec.loader) if spec.loader else None
    user_loader = source.user_settings if source is not None else None
    picks: list[StepSettings] = []
    reports: list[dict[str, Any]] = []
    tune_reports: list[TuneReport] = []
    stage_others: list[dict[int, float]] = []
    for repeat in range(repeats):
        model = spec.build()
        t0 = time.perf_counter()
        stages = StageLoad()
        report = tune(
            model,
            spec.inputs(),
            loader=source,
            budget_s=budget,
            seed=seed + repeat,
            notify=stages.notify,
        )
        seconds = time.perf_counter() - t0
        stage_others.append(stages.finish())
        pick = settings_for([t.knob for t in report.search.accepted])
        picks.append(pick)
        tune_reports.append(report)
        data = report.to_dict()
        reports.append(
            {
                "seconds": seconds,
                "others_cores_by_stage": stage_others[-1],
                "pick": [t.knob.id for t in report.search.accepted],
                "trials": data["trials"],
                "combined": data["combined"],
            }
        )
        print(
            f"  tune #{repeat + 1}: {seconds:.0f} s, pick: {label(pick, user_loader)}",
            file=sys.stderr,
        )
    workload = step_workload(spec, source)
    settings = grid(conv=spec.name == "conv", loader=source is not None)
    keys = {key(s, user_loader) for s in settings}
    extra = [p for p in picks if key(p, user_loader) not in keys]
    for p in extra:
        keys.add(key(p, user_loader))
        settings.append(p)
    print(f"  sweep: {len(settings)} combinations x {rounds} rounds", file=sys.stderr)
    arms, round_others, sweep_seconds = sweep(workload, settings, rounds, seed, user_loader)
    if source is not None:
        source.close()
    # The best is picked on the first copies' rounds and judged on the second
    # copies': picked and judged on the same rounds, the least of 24-96 medians is
    # also the luckiest (its copy's and its rounds' luck), and every other
    # combination's ratio to it is inflated by that luck.
    picking = [r for r in range(rounds) if r % COPIES == 0]
    judging = [r for r in range(rounds) if r % COPIES != 0]
    best = min(arms, key=lambda a: median([a.times[r] for r in picking]))
    by_key = {key(a.settings, user_loader): a for a in arms}
    ranked = sorted(arms, key=lambda a: median([a.times[r] for r in picking]))
    band = []
    for arm in ranked:
        ratio, low, high = versus(arm, best, judging) if arm is not best else (1.0, 1.0, 1.0)
        if low <= 1.0:
            band.append(arm.name)
    results = []
    for repeat, pick in enumerate(picks):
        arm = by_key[key(pick, user_loader)]
        ratio, low, high = versus(arm, best, judging) if arm is not best else (1.0, 1.0, 1.0)
        results.append(
            {
                "repeat": repeat + 1,
                "pick": arm.name,
                "rank": ranked.index(arm) + 1,
                "ratio_to_best": ratio,
                "ci95": [low, high],
                "in_band": arm.name in band,
                "is_best": arm is best,
                "tune_seconds": reports[repeat]["seconds"],
            }
        )
    default = by_key[key(StepSettings(), user_loader)]
    copy_shift = {
        arm.name: versus(arm, default, picking)[0] / versus(arm, default, judging)[0]
        for arm in arms
        if arm is not default
    }
    effects = [
        row
        for repeat, report in enumerate(tune_reports, 1)
        for row in trial_effects(
            arms, user_loader, report, repeat, round_others, stage_others[repeat - 1]
        )
    ]
    return {
        "workload": spec.name,
        "combinations": len(arms),
        "rounds": rounds,
        "sweep_seconds": sweep_seconds,
        "others_cores_by_round": round_others,
        "best": best.name,
        "best_median_s": median(best.times),
        "default_median_s": median(default.times),
        "band": band,
        "best_on_judging_rounds": min(
            arms, key=lambda a: median([a.times[r] for r in judging])
        ).name,
        "copy_shift": copy_shift,
        "picks": results,
        "trial_effects": effects,
        "reports": reports,
        "medians": {a.name: median(a.times) for a in ranked},
    }


def print_tables(results: list[dict[str, Any]]) -> None:
    print(
        "\n| workload | combinations | best (sweep) | tune's pick | rank | pick / best (95% CI) "
        "| in band | tune s | sweep s | tune / sweep |"
    )
    print("|---|---:|---|---|---:|---|---|---:|---:|---:|")
    for r in results:
        for p in r["picks"]:
            low, high = p["ci95"]
            print(
                f"| {r['workload']} #{p['repeat']} | {r['combinations']} | {r['best']} | "
                f"{p['pick']} | {p['rank']} | {p['ratio_to_best']:.3f} ({low:.3f}-{high:.3f}) | "
                f"{'best' if p['is_best'] else 'yes' if p['in_band'] else 'NO'} | "
                f"{p['tune_seconds']:.0f} | {r['sweep_seconds']:.0f} | "
                f"{p['tune_seconds'] / r['sweep_seconds']:.2f} |"
            )
    print(
        "\n| workload | run | knob | on top of | others' cores at tune | sweep: time ratio "
        "(95% CI), rounds | all rounds | tune |"
    )
    print("|---|---:|---|---|---:|---|---|---|")
    checked = agreed = 0
    for r in results:
        for row in r["trial_effects"]:
            ratio, low, high = row["sweep_ratio"]
            match = agrees(row)
            if match is not None:
                checked += 1
                agreed += match
            mark = "" if match is None else (" (agrees)" if match else " (DISAGREES)")
            every, lo_all, hi_all = row["sweep_ratio_all_rounds"]
            cores = row["others_cores_at_tune"]
            print(
                f"| {r['workload']} | {row['repeat']} | {row['knob']} | "
                f"{' + '.join(row['on_top_of']) or '-'} | "
                f"{'?' if cores is None else f'{cores:.2f}'} | {ratio:.3f} ({low:.3f}-{high:.3f}) "
                f"[{row['truth']}], {row['reference_rounds']} | "
                f"{every:.3f} ({lo_all:.3f}-{hi_all:.3f}) | "
                f"{row['tune_ratio']:.3f}, {row['verdict']}{mark} |"
            )
    print(f"\nverdicts with a clear reference (over 20% or none): {agreed} of {checked} agree")
    for r in results:
        print(
            f"\n{r['workload']}: default {r['default_median_s'] * 1e3:.2f} ms/step, best "
            f"{r['best_median_s'] * 1e3:.2f} ms/step ({r['best']}); noise band: "
            f"{len(r['band'])} of {r['combinations']} combinations"
        )
        shifts = sorted(abs(math.log(v)) for v in r["copy_shift"].values())
        print(
            f"  best on the first copies' rounds: {r['best']}; on the second copies': "
            f"{r['best_on_judging_rounds']}. A combination's ratio to the default, first "
            f"copies over second: median shift {math.exp(median(shifts)) - 1:.1%}, "
            f"largest {math.exp(shifts[-1]) - 1:.1%}"
        )
        loads = [regime(c) for c in r["others_cores_by_round"]]
        print(
            f"  sweep rounds with the other processes idle: {loads.count('idle')}, "
            f"holding a core: {loads.count('held')}, in between: {loads.count(None)} "
            f"(of {len(loads)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    load = os.getloadavg()[0]
    results = []
    OUT.mkdir(exist_ok=True)
    for name in args.workloads.split(","):
        print(f"{name}: load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
        result = run_workload(WORKLOADS[name], args.repeats, args.rounds, args.budget, args.seed)
        result["load_average"] = os.getloadavg()[0]
        results.append(result)
        # kept as each workload finishes: a run stopped midway still has its figures
        (OUT / "tune_accuracy.json").write_text(json.dumps(results, indent=1, default=str))
    print(
        f"torch {torch.__version__}, {os.cpu_count()} cores, load average {load:.1f} -> "
        f"{os.getloadavg()[0]:.1f}, {time.perf_counter() - started:.0f} s in all"
    )
    print_tables(results)


if __name__ == "__main__":
    main()
