"""The differential run at scale: generated files against every real loader, then the scan.

Three generators, every file loaded under every loader (torch.load with and without
``weights_only``, torch.jit.load, numpy.load(allow_pickle=True), joblib.load,
pickle.load) in child processes that report whether the file's marker payload ran
(tests/ckpt/oracle.py); then every file is scanned in worker processes that report
the time and peak memory of each scan:

1. opcode programs drawn by hypothesis (tests/ckpt/programs.py), each as a plain
   pickle file, a torch zip's ``data.pkl``, and joblib's zlib and gzip forms;
2. the loader-route corpus (tests/ckpt/routes_corpus.py): hostile, benign and
   malformed files built against each loader's route, the bombs included;
3. damaged files: route cases and evasion tricks with bytes overwritten, cut and
   inserted at random.

It prints the issue's criteria: hostile files (some loader ran the payload) the
scan called safe, or answered with exit 2; benign files ``weights_only`` loads that
the scan called unsafe; the slowest scan and the highest peak memory of a scan;
and how often the scan's "some loader reads this file" agrees with the loaders.

    python bench/ckpt_differential.py [--batches 4] [--size 60] [--damaged 200] [--seed 0]

joblib is no dependency of torchwise: ``pip install joblib`` first, or joblib.load's
column stays empty.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "ckpt"))

from craft import build_zip, torch_entries  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from oracle import LOADERS, Outcome, load_everywhere  # noqa: E402
from programs import Program, programs  # noqa: E402
from routes_corpus import flatbuffer_module, route_cases  # noqa: E402
from tricks import trick_cases  # noqa: E402

_SCANNER = r"""
import json, sys, time
from pathlib import Path
from torchwise.ckpt.scan import scan_file
for line in sys.stdin:
    path = line.strip()
    start = time.perf_counter()
    result = scan_file(Path(path))
    took = time.perf_counter() - start
    hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]
    loaders = [f for finding in result.findings for f in finding.loaders]
    print(json.dumps([path, result.verdict, took, int(hwm) >> 10, loaders]), flush=True)
"""


def scan_all(paths: list[Path], per_worker: int = 25) -> dict[str, tuple[str, float, int]]:
    """path -> (verdict, seconds, the worker's peak RSS in MiB after it), in fresh workers."""
    out: dict[str, tuple[str, float, int]] = {}
    for start in range(0, len(paths), per_worker):
        batch = paths[start : start + per_worker]
        proc = subprocess.run(
            [sys.executable, "-c", _SCANNER],
            input="".join(f"{p}\n" for p in batch),
            capture_output=True,
            text=True,
            timeout=600,
        )
        for line in proc.stdout.splitlines():
            path, verdict, took, rss, _ = json.loads(line)
            out[path] = (verdict, took, rss)
        for path in batch:
            out.setdefault(str(path), ("crashed", 0.0, 0))
    return out


def program_files(root: Path, batches: int, size: int, base_seed: int) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    marker = str(root / "markers" / "RAN")

    @seed(base_seed)
    @settings(max_examples=batches, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.lists(programs(), min_size=size, max_size=size))
    def draw(batch: list[Program]) -> None:
        for program in batch:
            blob = program.render(marker)
            n = len(files)
            clean = "" if program.payload or program.broken else " clean"
            forms = (blob, build_zip(torch_entries(blob)), zlib.compress(blob), gzip.compress(blob))
            for kind, data in zip(("pickle", "zip", "zlib", "gzip"), forms, strict=True):
                files[f"program {n:04d} {kind}{clean}"] = data

    draw()
    return files


def damaged_files(seeds: dict[str, bytes], count: int, rng: random.Random) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    names = sorted(seeds)
    for i in range(count):
        name = rng.choice(names)
        data = bytearray(seeds[name])
        for _ in range(rng.randint(1, 4)):
            where = rng.randrange(max(1, len(data)))
            action = rng.choice(("overwrite", "cut", "insert"))
            if action == "overwrite":
                data[where : where + 4] = rng.randbytes(4)
            elif action == "cut":
                del data[where : where + rng.randint(1, 64)]
            else:
                data[where:where] = rng.randbytes(rng.randint(1, 16))
        out[f"damaged {i:04d} from {name}"] = bytes(data)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--damaged", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the per-file results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-diff-") as tmp:
        root = Path(tmp)
        marker = root / "markers" / "RAN"
        marker.parent.mkdir(parents=True)
        routes = route_cases(str(marker), flatbuffer_module(str(marker)))
        tricks, _ = trick_cases(root)  # their markers sit beside the oracle's
        files: dict[str, bytes] = {f"route {c.kind}: {c.name}": c.data for c in routes}
        files.update({f"trick: {c.name}": c.data for c in tricks})
        files.update(program_files(root, args.batches, args.size, args.seed))
        seeds = {k: v for k, v in files.items() if k.startswith(("route", "trick"))}
        files.update(damaged_files(seeds, args.damaged, random.Random(args.seed)))
        paths = {}
        for i, (name, data) in enumerate(files.items()):
            paths[name] = root / f"f{i:05d}.bin"
            paths[name].write_bytes(data)
        start = time.perf_counter()
        outcomes = load_everywhere(paths, marker, LOADERS, per_file=60)
        loaded_in = time.perf_counter() - start
        start = time.perf_counter()
        scans = scan_all(list(paths.values()))
        scanned_in = time.perf_counter() - start
        report(files, paths, outcomes, scans, loaded_in, scanned_in, args.json)


def report(
    files: dict[str, bytes],
    paths: dict[str, Path],
    outcomes: dict[str, Outcome],
    scans: dict[str, tuple[str, float, int]],
    loaded_in: float,
    scanned_in: float,
    out: Path | None,
) -> None:
    hostile = [n for n in files if outcomes[n].runs_under]
    safe_hostile = [n for n in hostile if scans[str(paths[n])][0] in ("safe", "warning")]
    error_hostile = [n for n in hostile if scans[str(paths[n])][0] == "error"]
    wo = [n for n in files if outcomes[n].loads("torch.load(weights_only=True)")]
    # benign: built without a payload (a clean program, a benign route case, damage to one)
    benign = [n for n in wo if " clean" in n or "route benign" in n]
    wo_unsafe = [n for n in benign if scans[str(paths[n])][0] == "unsafe"]
    carrying = [n for n in wo if n not in benign and not outcomes[n].runs_under]
    carrying_unsafe = [n for n in carrying if scans[str(paths[n])][0] == "unsafe"]
    readable = [n for n in files if any(outcomes[n].loads(lo) for lo in LOADERS)]
    error_readable = [n for n in readable if scans[str(paths[n])][0] == "error"]
    slowest = max(files, key=lambda n: scans[str(paths[n])][1])
    peak = max(scans[str(paths[n])][2] for n in files)
    crashed = [n for n in files if scans[str(paths[n])][0] == "crashed"]
    by_loader = {lo: sum(lo in outcomes[n].runs_under for n in files) for lo in LOADERS}
    print(f"{len(files)} files: {sum(n.startswith('program') for n in files)} generated programs "
          f"(as pickle, zip, zlib, gzip), {sum(n.startswith('route') for n in files)} route cases, "
          f"{sum(n.startswith('trick') for n in files)} tricks, "
          f"{sum(n.startswith('damaged') for n in files)} damaged files")  # fmt: skip
    print(f"loaded under {len(LOADERS)} loaders in {loaded_in:.0f} s; "
          f"scanned in {scanned_in:.0f} s")  # fmt: skip
    print(f"- payload ran under some loader: {len(hostile)} "
          + ", ".join(f"{lo} {n}" for lo, n in by_loader.items() if n))  # fmt: skip
    print(f"  scanned safe: {len(safe_hostile)}; scanned exit 2: {len(error_hostile)}")
    for name in (safe_hostile + error_hostile)[:10]:
        print(f"  MISSED: {name}: runs under {sorted(outcomes[name].runs_under)}")
    print(f"- benign files weights_only loads: {len(benign)}; scanned unsafe: {len(wo_unsafe)}")
    for name in wo_unsafe[:10]:
        print(f"  FALSE ALARM: {name}")
    print(f"- files carrying a payload no modelled loader runs, that weights_only loads: "
          f"{len(carrying)}; scanned unsafe (fail-closed): {len(carrying_unsafe)}")  # fmt: skip
    print(f"- some loader reads {len(readable)}; scanned exit 2 all the same: "
          f"{len(error_readable)}")  # fmt: skip
    print(f"- slowest scan {scans[str(paths[slowest])][1]:.2f} s ({slowest}); highest peak "
          f"memory of a scanning worker {peak} MiB; crashed scans {len(crashed)}")  # fmt: skip
    if out is not None:
        rows = {n: {"runs_under": sorted(outcomes[n].runs_under), "loaders": outcomes[n].result,
                    "scan": scans[str(paths[n])]} for n in files}  # fmt: skip
        out.write_text(json.dumps(rows, indent=1))
    if safe_hostile or error_hostile or wo_unsafe or crashed:
        sys.exit(1)


if __name__ == "__main__":
    main()
