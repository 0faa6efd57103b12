"""torchwise doctor against torchtest on the doctor bug catalogue, plus suite timings.

Runs both tools over the same buggy and clean models (tests/doctor/doctor_bugs.py)
in one process and prints a detection table, median times, and the time of the
whole doctor suite on zoo:resnet18 with a batch of 8 at 64x64.

    python bench/doctor_catalogue.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "doctor"))

from doctor_bugs import BUGGY, CLEAN, Case, build  # noqa: E402

from torchwise.doctor import Status, check  # noqa: E402
from torchwise.doctor.context import primary_output  # noqa: E402
from torchwise.losses import choose_loss  # noqa: E402


def run_doctor(case: Case) -> tuple[str, list[str], float]:
    model, inputs = build(case)
    start = time.perf_counter()
    report = check(model, inputs, **case.options)
    seconds = time.perf_counter() - start
    flagged = [r.id for r in report if r.status in (Status.FAIL, Status.WARN)]
    meant = report[case.check].status.value if case.check else "-"
    return meant, flagged, seconds


def run_torchtest(case: Case) -> tuple[str, float]:
    """torchtest's full suite: vars change, NaN, inf (output range needs a known range)."""
    import torchtest

    model, inputs = build(case)
    with torch.no_grad():
        out = primary_output(model(inputs))
    loss = choose_loss(out)
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    try:
        torchtest.test_suite(
            model,
            loss.fn,
            optim,
            [inputs, loss.target],
            test_vars_change=True,
            test_nan_vals=True,
            test_inf_vals=True,
        )
        verdict = "pass"
    except (
        torchtest.VariablesChangeException,
        torchtest.NaNTensorException,
        torchtest.InfTensorException,
        torchtest.RangeException,
    ) as exc:
        verdict = f"caught ({type(exc).__name__.replace('Exception', '')})"
    except Exception as exc:
        verdict = f"crash ({type(exc).__name__})"
    return verdict, time.perf_counter() - start


def resnet18_suite(repeat: int) -> list[float]:
    from torchwise.target import resolve_target

    times = []
    for _ in range(repeat):
        resolved = resolve_target("zoo:resnet18", inputs=["f32[8,3,64,64]"])
        start = time.perf_counter()
        report = check(resolved.model, resolved.args)
        times.append(time.perf_counter() - start)
        per_check = ", ".join(f"{r.id} {r.seconds:.1f}s" for r in report)
    print(f"  last run per check: {per_check}")
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    rows: list[tuple[Any, ...]] = []
    doctor_times, tt_times = [], []
    for case in BUGGY + CLEAN:
        meant, flagged, t_doc = run_doctor(case)
        verdict, t_tt = run_torchtest(case)
        doctor_times.append(t_doc)
        tt_times.append(t_tt)
        rows.append((case.name, case.check or "(clean)", meant, ",".join(flagged) or "-", verdict))
    print("## Detection on the doctor bug catalogue\n")
    print("| case | meant check | doctor (that check) | doctor flags | torchtest |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    buggy = rows[: len(BUGGY)]
    clean = rows[len(BUGGY) :]
    doc_hits = sum(r[2] in ("fail", "warn") for r in buggy)
    tt_hits = sum(r[4].startswith("caught") for r in buggy)
    doc_false = sum(r[3] != "-" for r in clean)
    tt_false = sum(not r[4].startswith("pass") for r in clean)
    print(
        f"\nbuggy models caught: doctor {doc_hits}/{len(buggy)}, torchtest {tt_hits}/{len(buggy)}"
    )
    print(
        f"false alarms on clean models: doctor {doc_false}/{len(clean)}, "
        f"torchtest {tt_false}/{len(clean)}"
    )
    md, mt = statistics.median(doctor_times), statistics.median(tt_times)
    print(
        f"median time per model: doctor (15 checks) {md:.2f}s, torchtest suite {mt:.3f}s "
        f"(ratio {md / mt:.0f}x; torchtest runs one train step and one forward)"
    )
    print("\n## Whole doctor suite on zoo:resnet18, batch 8 at 64x64\n")
    times = resnet18_suite(args.repeat)
    print(f"  median {statistics.median(times):.1f}s over {len(times)} runs "
          f"(runs: {', '.join(f'{t:.1f}' for t in times)})")  # fmt: skip


if __name__ == "__main__":
    main()
