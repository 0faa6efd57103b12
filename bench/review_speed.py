"""How fast is ``torchwise review`` on a real PyTorch library, against its peers?

Runs, in one process and on the same files (the ``.py`` sources of a wheel
from PyPI, timm by default, about 140k lines), each command as a user would
and prints the median wall and CPU time (the command and its worker processes;
the fairer figure on a shared machine) of several runs, and the ratios:

- ``torchwise review`` cold (``--no-cache``) with one job, and with all cores;
- ``torchwise review`` with a warm cache (nothing changed since the last run);
- TorchFix (``torchfix``, the only other PyTorch linter; all cores, its default);
- ``ruff check --no-cache`` with ruff's default rules (a generic linter in Rust).

A command slower than ``--slow-limit`` seconds is run once and marked so.
Usage: ``python bench/review_speed.py [--corpus timm] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _corpus import corpus, size, version

BIN = Path(sys.executable).parent
OUT = Path(__file__).parent / ".out" / "review_speed"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its workers)."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]!r}")
    return elapsed, _children_cpu() - cpu


def measure(command: list[str], cwd: Path, runs: int, slow_limit: float) -> Row:
    """Medians of wall and CPU time; a command slower than ``slow_limit`` runs once."""
    walls: list[float] = []
    cpus: list[float] = []
    while len(walls) < runs:
        wall, cpu = timed(command, cwd)
        walls.append(wall)
        cpus.append(cpu)
        if walls[0] > slow_limit:
            break
    return statistics.median(walls), statistics.median(cpus), len(walls)


Row = tuple[float, float, int]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="timm", help="a PyPI package with PyTorch code")
    parser.add_argument("--runs", type=int, default=3, help="runs per command (median)")
    parser.add_argument("--slow-limit", type=float, default=60.0, help="run once when slower")
    parser.add_argument("--skip-torchfix", action="store_true")
    args = parser.parse_args()

    source = corpus(args.corpus).resolve()
    files, lines = size(source)
    cores = os.cpu_count() or 1
    # A private config and cache: the corpus's own settings and ours stay out of it.
    OUT.mkdir(parents=True, exist_ok=True)
    config = OUT / "pyproject.toml"
    config.write_text("[tool.torchwise]\n")
    cache = OUT / ".torchwise_cache"
    shutil.rmtree(cache, ignore_errors=True)

    review = [str(BIN / "torchwise"), "review", str(source), "--config", str(config), "--exit-zero"]
    rows: list[tuple[str, Row]] = []
    slow = args.slow_limit
    rows.append(
        (
            "torchwise review, cold, --jobs 1",
            measure([*review, "--no-cache", "--jobs", "1"], OUT, args.runs, slow),
        )
    )
    rows.append(
        (
            f"torchwise review, cold, --jobs {cores}",
            measure([*review, "--no-cache"], OUT, args.runs, slow),
        )
    )
    subprocess.run(review, cwd=OUT, capture_output=True, check=False)  # fill the cache
    rows.append(("torchwise review, warm cache", measure(review, OUT, args.runs, slow)))
    torchfix = shutil.which("torchfix", path=str(BIN)) or shutil.which("torchfix")
    if torchfix and not args.skip_torchfix:
        label = f"TorchFix {_version('torchfix')} (all cores)"
        rows.append((label, measure([torchfix, str(source)], OUT, args.runs, slow)))
    ruff = shutil.which("ruff", path=str(BIN)) or shutil.which("ruff")
    if ruff:
        command = [ruff, "check", "--isolated", "--no-cache", "--exit-zero", str(source)]
        label = f"ruff {_version('ruff')} check (default rules)"
        rows.append((label, measure(command, OUT, args.runs, slow)))
    one_wall, one_cpu, _ = rows[0][1]

    print(f"corpus: {args.corpus} {version(args.corpus)}: {files} files, {lines:,} lines")
    print(f"machine: {cores} cores; median of {args.runs} runs", end="")
    print(f" (one run when > {args.slow_limit:g} s)")
    print()
    print("| command | median wall s | median CPU s | runs | wall vs -j1 | CPU vs -j1 |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, (wall, cpu, runs) in rows:
        print(
            f"| {label} | {wall:.2f} | {cpu:.2f} | {runs} "
            f"| {wall / one_wall:.2f}x | {cpu / one_cpu:.2f}x |"
        )
    print()
    for label, (wall, cpu, _) in rows:
        if label.startswith("TorchFix"):
            for what, ratio in (("wall", wall / one_wall), ("CPU", cpu / one_cpu)):
                verdict = "meets" if ratio >= 30 else "MISSES"
                print(f"TorchFix / torchwise -j1, {what} time: {ratio:.0f}x ({verdict} >= 30x)")
    warm = next(wall for label, (wall, _, _) in rows if "warm" in label)
    print(f"warm cache: {warm:.2f} s ({'meets' if warm < 1 else 'MISSES'} < 1 s)")


def _version(tool: str) -> str:
    try:
        from importlib.metadata import version as dist_version

        return dist_version(tool)
    except Exception:  # a label only
        return ""


if __name__ == "__main__":
    main()
