"""One thread against the default count when each runs for a spell of seconds, not samples.

tune's thread stage and bench/tune_accuracy.py's sweep both time a thread count a
fraction of a second at a time. On a shared virtual machine a count's effect can
take seconds to develop (the host places and schedules the second vCPU as it
sees fit), so this script runs each count for a spell of ``--steps`` steps
(after a quarter as many untimed), alternating which goes first, and prints the
ratio one thread / default of each pair of spells, and their median and range.

    python bench/tune_thread_spells.py --workload transformer --steps 400 --spells 12
    python bench/tune_thread_spells.py --workload mlp-slow-loader --workers 4

``--workers N`` runs the workload's loader with N workers (persistent), as tune's
DataLoader knob would; 0 keeps the user's loader. Figures: docs/benchmarks.md,
"The thread count over longer spells".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torchwise.tune.loader import LoaderSettings, load_loader
from torchwise.tune.step import StepSettings, TrainingStep
from tune_workloads import WORKLOADS, step_workload


def steal_jiffies() -> int:
    """Time the hypervisor ran something else on this VM's vCPUs (Linux; 0 elsewhere)."""
    try:
        with open("/proc/stat") as stat:
            return int(stat.readline().split()[8])
    except (OSError, IndexError, ValueError):
        return 0


def spell(step: TrainingStep, steps: int) -> tuple[float, float]:
    """Seconds per step over ``steps`` steps after a quarter as many untimed, and steal/s."""
    with step.scope():
        step.run(max(1, steps // 4))
        steal, start = steal_jiffies(), time.perf_counter()
        step.run(steps)
        seconds = time.perf_counter() - start
        return seconds / steps, (steal_jiffies() - steal) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="transformer")
    parser.add_argument("--steps", type=int, default=400, help="timed steps a spell")
    parser.add_argument("--spells", type=int, default=12, help="pairs of spells")
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    spec = WORKLOADS[args.workload]
    source = load_loader(spec.loader) if spec.loader else None
    workload = step_workload(spec, source)
    loader = LoaderSettings(args.workers, False, True, None) if args.workers else None
    default = torch.get_num_threads()
    steps = {
        default: TrainingStep(workload, StepSettings(loader=loader)),
        1: TrainingStep(workload, StepSettings(threads=1, loader=loader)),
    }
    ratios = []
    for index in range(args.spells):
        order = (default, 1) if index % 2 == 0 else (1, default)
        timed = {n: spell(steps[n], args.steps) for n in order}
        ratios.append(timed[1][0] / timed[default][0])
        print(
            f"spell {index}: {default} threads {timed[default][0] * 1e3:.2f} ms "
            f"(steal {timed[default][1]:.1f}/s), 1 thread {timed[1][0] * 1e3:.2f} ms "
            f"(steal {timed[1][1]:.1f}/s), ratio {ratios[-1]:.3f}",
            flush=True,
        )
    print(
        f"{args.workload}, {args.steps}-step spells: 1 thread / {default} threads "
        f"median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}"
    )
    if source is not None:
        source.close()


if __name__ == "__main__":
    main()
