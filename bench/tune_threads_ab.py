"""Does tune's session time a thread-count change the way a plain alternating loop does?

bench/tune_accuracy.py found tune's ``threads-1`` verdict at 0.81 (MLP, twice) and
1.14 (conv net) of two threads' time where its sweep measured 1.00. This script
times the same pair of steps, on one workload of bench/tune_workloads.py, with
several designs, interleaved block by block so that the machine's load drifts
over all of them alike:

- ``tune``: tune's own session (:func:`torchwise.tune.session.run_session`, the
  arms and settle steps :class:`torchwise.tune.search.Search` builds): baseline
  at the default thread count, arm ``threads=1``;
- ``tune-1step``: the same with one settle step and no settle time, as tune
  did before the thread-switch settle (:data:`torchwise.tune.search.THREAD_SWITCH_SETTLE_S`);
- ``tune-swapped``: the same session with the roles swapped (baseline
  ``threads=1``, arm the default), reported as threads-1 / default;
- ``aa``: an A/A session, two default steps (must read 1.00);
- ``alternating``: the sweep's design, each round both steps in a random order,
  each sample one settle step and then the timed steps;
- ``alternating-settled``: the same with settle steps lasting
  :data:`~torchwise.tune.search.THREAD_SWITCH_SETTLE_S` (at least one).

Each design's per-round log ratios are pooled over the blocks in which the
machine's other processes were idle, and over those in which they held a core; the ratio is their
Hodges-Lehmann estimate with a 95% signed-rank interval. Every block prints the
load average and the cores the machine's other processes used meanwhile (from
/proc/stat, this process's CPU time taken out): a 2-thread step is a different
step when another job holds one of two cores.

    python bench/tune_threads_ab.py [--workload mlp-slow-loader] [--blocks 6] [--rounds 20]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _machine import HELD, IDLE, Others
from torchwise.tune.arms import THREAD_SWITCH_SETTLE_S, Settle
from torchwise.tune.arms import session_arms as _arms
from torchwise.tune.arms import settle_for as _settle
from torchwise.tune.loader import LoaderSource, load_loader
from torchwise.tune.session import SessionConfig, paired, run_session
from torchwise.tune.stats import hodges_lehmann, median
from torchwise.tune.step import StepSettings, TrainingStep, Workload
from tune_workloads import WORKLOADS, step_workload

Pairs = list[tuple[float, float]]  # (threads-1 s/step, default s/step) per round


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}"


def tune_session(
    workload: Workload,
    first: StepSettings,
    second: StepSettings,
    rounds: int,
    settle: Settle | None = None,
) -> Pairs:
    """tune's session with ``first`` as the baseline and ``second`` as the one arm.

    ``settle`` overrides the settle tune's search gives these arms.
    """
    named = [("baseline", TrainingStep(workload, first)), ("arm", TrainingStep(workload, second))]
    settle = settle or _settle([s.settings for _, s in named])
    config = SessionConfig(min_rounds=rounds, max_rounds=rounds, budget_s=1e9)
    result = run_session(*_arms(workload, named, settle), config)
    arm_t, base_t = paired(result.arms["arm"])
    return list(zip(arm_t, base_t, strict=True))


def alternating(
    workload: Workload,
    one: StepSettings,
    two: StepSettings,
    rounds: int,
    seed: int,
    settle_s: float = 0.0,
) -> Pairs:
    """The sweep's design: each round both, in a random order, one settle step before each.

    With ``settle_s``, as many settle steps as last that long (at least one).
    """
    steps = {"one": TrainingStep(workload, one), "two": TrainingStep(workload, two)}
    for step in steps.values():
        with step.scope():
            step.run(2)
    with steps["two"].scope():
        t0 = time.perf_counter()
        steps["two"].run(3)
        per_step = (time.perf_counter() - t0) / 3
    # tune's own calibration (10 ms a sample), so only the order differs from tune's
    count = max(1, min(64, math.ceil(0.01 / per_step)))
    settle = max(1, math.ceil(settle_s / per_step))
    rng = random.Random(seed)
    pairs = []
    for _ in range(rounds):
        times = {}
        order = list(steps)
        rng.shuffle(order)
        for name in order:
            step = steps[name]
            with step.scope():
                step.run(settle)
                t0 = time.perf_counter()
                step.run(count)
                times[name] = (time.perf_counter() - t0) / count
        pairs.append((times["one"], times["two"]))
    return pairs


def summary(pairs: Pairs) -> str:
    diffs = [math.log(a / b) for a, b in pairs]
    estimate, low, high = hodges_lehmann(diffs, 0.95)
    ones, twos = [a for a, _ in pairs], [b for _, b in pairs]
    return (
        f"{math.exp(estimate):.3f} ({math.exp(low):.3f}-{math.exp(high):.3f}), n={len(pairs)}; "
        f"median ms: {median(ones) * 1e3:.2f} vs {median(twos) * 1e3:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp-slow-loader", choices=sorted(WORKLOADS))
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--designs", default="tune,tune-1step,aa,alternating,alternating-settled")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    spec = WORKLOADS[args.workload]
    source: LoaderSource | None = load_loader(spec.loader) if spec.loader else None
    torch.manual_seed(0)
    workload = step_workload(spec, source)
    default, one = StepSettings(), StepSettings(threads=1)
    rng = random.Random(args.seed)
    designs: dict[str, Callable[[int], Pairs]] = {
        "tune": lambda r: tune_session(workload, default, one, r),
        "tune-1step": lambda r: tune_session(workload, default, one, r, Settle(1, 0.0)),
        "tune-swapped": lambda r: [(b, a) for a, b in tune_session(workload, one, default, r)],
        "aa": lambda r: tune_session(workload, default, default, r),
        "alternating": lambda r: alternating(workload, one, default, r, rng.randrange(2**31)),
        "alternating-settled": lambda r: alternating(
            workload, one, default, r, rng.randrange(2**31), THREAD_SWITCH_SETTLE_S
        ),
    }
    chosen = args.designs.split(",")
    print(
        f"{args.workload}: torch {torch.__version__}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} threads, {_load()}"
    )
    # Pooled by what the other processes did meanwhile: a 2-thread step is another
    # step when they hold one of the two cores, so the two are not mixed.
    regimes = (f"others idle (< {IDLE} cores)", f"others on a core (> {HELD})")
    pooled: dict[str, dict[str, Pairs]] = {r: {name: [] for name in chosen} for r in regimes}
    started = time.perf_counter()
    total = Others()
    for block in range(args.blocks):
        order = list(chosen)
        rng.shuffle(order)
        for name in order:
            others = Others()
            pairs = designs[name](args.rounds)
            cores = others.cores()
            if cores < IDLE or cores > HELD:
                pooled[regimes[cores > HELD]][name] += pairs
            print(
                f"  block {block + 1} {name:>19}: {summary(pairs)}  "
                f"[others {cores:.2f} cores, {_load()}]",
                flush=True,
            )
    print(
        f"\npooled, threads-1 / default (aa: default / default), "
        f"{time.perf_counter() - started:.0f} s, others {total.cores():.2f} cores, {_load()}"
    )
    for regime, by_design in pooled.items():
        print(f" {regime}:")
        for name, pairs in by_design.items():
            if pairs:
                print(f"  {name:>19}: {summary(pairs)}")
    if source is not None:
        source.close()


if __name__ == "__main__":
    main()
