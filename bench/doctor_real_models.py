"""torchwise doctor on real third-party architectures: false alarms and planted-bug catches.

Runs the whole doctor suite on every healthy case of tests/doctor/real_models.py
(transformers, diffusers and torch modules at test size, plus reproductions of the
nanoGPT, minGPT and timm zero-init patterns) and the check meant for each planted
bug, then prints a table, the false-alarm rate (healthy models with any FAIL or
WARN) and the catch rate (planted bugs flagged by their check).

    python bench/doctor_real_models.py [--only NAME,NAME]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "doctor"))

from real_models import HEALTHY, PLANTED, Case, build  # noqa: E402

from torchwise.doctor import Status, check  # noqa: E402


def run(case: Case) -> tuple[str, list[str], float]:
    model, args, kwargs, options = build(case)
    checks = [case.check] if case.check else None
    start = time.perf_counter()
    report = check(model, args, checks, kwargs=kwargs, name=case.name, **options)
    seconds = time.perf_counter() - start
    flagged = [f"{r.id} {r.status.value}" for r in report if r.status in (Status.FAIL, Status.WARN)]
    meant = report[case.check].status.value if case.check else "-"
    return meant, flagged, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated case names")
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else None
    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    healthy = [c for c in HEALTHY if wanted is None or c.name in wanted]
    planted = [c for c in PLANTED if wanted is None or c.name in wanted]
    print("## Healthy real models: the whole doctor suite\n")
    print("| model | architecture | flagged | seconds |")
    print("|---|---|---|---:|")
    false_alarms, times = 0, []
    for case in healthy:
        _, flagged, seconds = run(case)
        false_alarms += bool(flagged)
        times.append(seconds)
        print(f"| {case.name} | {case.source} | {', '.join(flagged) or '-'} | {seconds:.1f} |")
    print("\n## Planted bugs: the check meant for each\n")
    print("| case | model | bug | check | verdict |")
    print("|---|---|---|---|---|")
    caught = 0
    for case in planted:
        meant, _, _ = run(case)
        caught += meant in ("fail", "warn")
        bug = case.bug.replace("|", "\\|")
        print(f"| {case.name} | {case.source} | {bug} | {case.check} | {meant} |")
    if healthy:
        print(
            f"\nfalse alarms: {false_alarms} of {len(healthy)} healthy models have a FAIL or WARN; "
            f"median {statistics.median(times):.1f}s per full suite (shared machine)"
        )
    if planted:
        print(f"planted bugs caught by their check: {caught} of {len(planted)}")


if __name__ == "__main__":
    main()
