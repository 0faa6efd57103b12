"""How fast is ``torchwise review`` on a real PyTorch library, against its peers?

Runs, in one process and on the same files (the ``.py`` sources of a wheel
from PyPI, timm by default, about 140k lines), each command as a user would,
**interleaved** (one run of each command, then the next round), and prints the
median wall and CPU time (the command and its worker processes; the fairer
figure on a shared machine) and the ratios:

- ``torchwise review`` cold (``--no-cache``) with one job, and with all cores;
- ``torchwise review`` with a warm cache (nothing changed since the last run);
- with ``--baseline REF``: the cold one-job run of torchwise at git commit REF
  (its ``src/`` unpacked with ``git archive`` and put first on ``PYTHONPATH``),
  so that a change is measured against the code before it on the same machine,
  under the same load;
- TorchFix (``torchfix``, the only other PyTorch linter; all cores, its default);
- ``ruff check --no-cache`` with ruff's default rules and with ``--select ALL``
  (a generic linter in Rust; issue 21's yardstick: torchwise cold ``--jobs 1``
  within 4x ruff ``--select ALL``'s CPU time, the goal 2x);
- one file of about 300 lines from the corpus, reviewed cold on its own (the
  editor's and pre-commit's case; goal at most 0.15 s wall).

A command slower than ``--slow-limit`` seconds is run once and marked so.
Usage: ``python bench/review_speed.py [--corpus timm] [--runs 5] [--baseline 55405c1]``.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _corpus import corpus, size, version

BIN = Path(sys.executable).parent
OUT = Path(__file__).parent / ".out" / "review_speed"
REPO = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Command:
    label: str
    argv: list[str]
    env: dict[str, str] | None = None
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def run(self, cwd: Path) -> None:
        cpu, start = _children_cpu(), time.perf_counter()
        done = subprocess.run(
            self.argv,
            cwd=cwd,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        elapsed = time.perf_counter() - start
        if done.returncode not in (0, 1):
            raise SystemExit(f"{self.label} failed ({done.returncode}): {done.stderr[-2000:]!r}")
        self.walls.append(elapsed)
        self.cpus.append(_children_cpu() - cpu)

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


def baseline_source(ref: str) -> Path:
    """``src/`` of torchwise at ``ref``, unpacked once under bench/.out/."""
    target = OUT.parent / f"baseline-{ref}"
    if not (target / "src" / "torchwise").is_dir():
        archive = subprocess.run(
            ["git", "archive", "--format=tar", ref, "src"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(target, filter="data")
    return target / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="timm", help="a PyPI package with PyTorch code")
    parser.add_argument("--runs", type=int, default=3, help="rounds of runs (median)")
    parser.add_argument("--slow-limit", type=float, default=60.0, help="run once when slower")
    parser.add_argument("--skip-torchfix", action="store_true")
    parser.add_argument("--baseline", help="a git commit of torchwise to compare with")
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
    commands = [
        Command("torchwise review, cold, --jobs 1", [*review, "--no-cache", "--jobs", "1"]),
        Command(f"torchwise review, cold, --jobs {cores}", [*review, "--no-cache"]),
        Command("torchwise review, warm cache", review),
    ]
    if args.baseline:
        env = {**os.environ, "PYTHONPATH": str(baseline_source(args.baseline))}
        commands.insert(
            1,
            Command(
                f"torchwise at {args.baseline}, cold, --jobs 1",
                [*review, "--no-cache", "--jobs", "1"],
                env,
            ),
        )
    ruff = shutil.which("ruff", path=str(BIN)) or shutil.which("ruff")
    if ruff:
        argv = [ruff, "check", "--isolated", "--no-cache", "--exit-zero", str(source)]
        commands.append(Command(f"ruff {_version('ruff')} check (default rules)", argv))
        every = [*argv[:2], "--select", "ALL", *argv[2:]]
        commands.append(Command(f"ruff {_version('ruff')} check --select ALL", every))
    single = _file_near(source, 300)
    single_lines = len(single.read_text(errors="replace").splitlines())
    commands.append(
        Command(
            f"torchwise review, one {single_lines}-line file, cold",
            [
                str(BIN / "torchwise"),
                "review",
                str(single),
                "--config",
                str(config),
                "--exit-zero",
                "--no-cache",
            ],
        )
    )
    slow: list[Command] = []
    torchfix = shutil.which("torchfix", path=str(BIN)) or shutil.which("torchfix")
    if torchfix and not args.skip_torchfix:
        slow.append(
            Command(f"TorchFix {_version('torchfix')} (all cores)", [torchfix, str(source)])
        )

    subprocess.run(review, cwd=OUT, capture_output=True, check=False)  # fill the cache
    for _ in range(args.runs):  # interleaved: each round runs every command once
        for command in commands:
            command.run(OUT)
    for command in slow:
        command.run(OUT)
        while len(command.walls) < args.runs and command.walls[0] <= args.slow_limit:
            command.run(OUT)
    rows = [*commands, *slow]
    one = commands[0]

    print(f"corpus: {args.corpus} {version(args.corpus)}: {files} files, {lines:,} lines")
    print(f"machine: {cores} cores, shared; medians of {args.runs} interleaved rounds", end="")
    print(f" (one run when > {args.slow_limit:g} s)")
    print()
    print("| command | median wall s | median CPU s | runs | wall vs -j1 | CPU vs -j1 |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.label} | {row.wall:.2f} | {row.cpu:.2f} | {len(row.walls)} "
            f"| {row.wall / one.wall:.2f}x | {row.cpu / one.cpu:.2f}x |"
        )
    print()
    for row in slow:
        for what, ratio in (("wall", row.wall / one.wall), ("CPU", row.cpu / one.cpu)):
            verdict = "meets" if ratio >= 30 else "MISSES"
            print(f"TorchFix / torchwise -j1, {what} time: {ratio:.0f}x ({verdict} >= 30x)")
    every = next((row for row in rows if "--select ALL" in row.label), None)
    if every is not None:
        ratio = one.cpu / every.cpu
        verdict = "meets the goal" if ratio <= 2 else "meets" if ratio <= 4 else "MISSES"
        print(
            f"torchwise -j1 / ruff --select ALL, CPU time: {ratio:.2f}x ({verdict}: <= 4x, goal 2x)"
        )
    jobs = commands[1] if not args.baseline else commands[2]
    verdict = "meets" if jobs.wall <= one.wall * 1.05 else "MISSES"
    print(f"--jobs {cores} / --jobs 1, wall: {jobs.wall / one.wall:.2f}x ({verdict}: never slower)")
    single_row = next(row for row in rows if "one " in row.label)
    verdict = "meets" if single_row.wall <= 0.15 else "MISSES"
    print(f"one file cold: {single_row.wall:.3f} s wall ({verdict}: <= 0.15 s)")
    warm = next(row for row in rows if "warm" in row.label)
    print(f"warm cache: {warm.wall:.2f} s ({'meets' if warm.wall < 1 else 'MISSES'} < 1 s)")
    if args.baseline:
        base = commands[1]
        for what, ratio in (("wall", one.wall / base.wall), ("CPU", one.cpu / base.cpu)):
            verdict = "meets" if ratio <= 1.5 else "MISSES"
            print(f"cold -j1 vs {args.baseline}, {what}: {ratio:.2f}x ({verdict} <= 1.5x)")


def _file_near(source: Path, lines: int) -> Path:
    """The corpus file whose length is closest to ``lines`` (first by name on a tie)."""
    files = sorted(source.rglob("*.py"))
    return min(
        files, key=lambda f: (abs(len(f.read_text(errors="replace").splitlines()) - lines), str(f))
    )


def _version(tool: str) -> str:
    try:
        from importlib.metadata import version as dist_version

        return dist_version(tool)
    except Exception:  # a label only
        return ""


if __name__ == "__main__":
    main()
