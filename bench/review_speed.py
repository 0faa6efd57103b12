"""How fast is ``torchwise review`` on a real PyTorch library, against its peers?

Runs, in one process and on the same files (the ``.py`` sources of a wheel
from PyPI, timm by default, about 140k lines), each command as a user would
and prints the median wall time of several runs and the ratios:

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


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]!r}")
    return elapsed


def measure(
    command: list[str], cwd: Path, runs: int, slow_limit: float, before: list[str] | None = None
) -> tuple[float, int]:
    """(median seconds, number of runs); a slow command runs once."""
    times: list[float] = []
    while len(times) < runs:
        if before is not None:
            subprocess.run(before, cwd=cwd, capture_output=True, check=False)
        times.append(timed(command, cwd))
        if times[0] > slow_limit:
            break
    return statistics.median(times), len(times)


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
    rows: list[tuple[str, float, int]] = []
    one, runs = measure([*review, "--no-cache", "--jobs", "1"], OUT, args.runs, args.slow_limit)
    rows.append(("torchwise review, cold, --jobs 1", one, runs))
    seconds, runs = measure([*review, "--no-cache"], OUT, args.runs, args.slow_limit)
    rows.append((f"torchwise review, cold, --jobs {cores}", seconds, runs))
    subprocess.run(review, cwd=OUT, capture_output=True, check=False)  # fill the cache
    seconds, runs = measure(review, OUT, args.runs, args.slow_limit)
    rows.append(("torchwise review, warm cache", seconds, runs))
    torchfix = shutil.which("torchfix", path=str(BIN)) or shutil.which("torchfix")
    if torchfix and not args.skip_torchfix:
        seconds, runs = measure([torchfix, str(source)], OUT, args.runs, args.slow_limit)
        rows.append((f"TorchFix {_version('torchfix')} (all cores)", seconds, runs))
    ruff = shutil.which("ruff", path=str(BIN)) or shutil.which("ruff")
    if ruff:
        command = [ruff, "check", "--isolated", "--no-cache", "--exit-zero", str(source)]
        seconds, runs = measure(command, OUT, args.runs, args.slow_limit)
        rows.append((f"ruff {_version('ruff')} check (default rules)", seconds, runs))

    print(f"corpus: {args.corpus} {version(args.corpus)}: {files} files, {lines:,} lines")
    print(f"machine: {cores} cores; median of {args.runs} runs", end="")
    print(f" (one run when > {args.slow_limit:g} s)")
    print()
    print(f"| {'command':<42} | {'median s':>9} | {'runs':>4} | {'vs torchwise -j1':>16} |")
    print(f"|{'-' * 44}|{'-' * 11}:|{'-' * 6}:|{'-' * 18}:|")
    for label, seconds, runs in rows:
        ratio = seconds / one
        print(f"| {label:<42} | {seconds:>9.2f} | {runs:>4} | {ratio:>15.2f}x |")
    print()
    for label, seconds, _ in rows:
        if label.startswith("TorchFix"):
            verdict = "meets" if seconds / one >= 30 else "MISSES"
            print(f"torchwise -j1 is {seconds / one:.0f}x faster than TorchFix ({verdict} >= 30x)")
    warm = next(seconds for label, seconds, _ in rows if "warm" in label)
    print(f"warm cache: {warm:.2f} s ({'meets' if warm < 1 else 'MISSES'} < 1 s)")


def _version(tool: str) -> str:
    try:
        from importlib.metadata import version as dist_version

        return dist_version(tool)
    except Exception:  # a label only
        return ""


if __name__ == "__main__":
    main()
