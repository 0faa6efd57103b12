"""Checkpoint scanners compared in one run: detection and time.

Builds a corpus of benign checkpoints and hostile ones: one per payload technique
(tests/ckpt/ckpt_corpus.py), one per scanner-evasion trick (tests/ckpt/tricks.py:
zip member confusion, C-unpickler parser differentials, torch.load's format
order, tar checkpoints) and one per loader route (tests/ckpt/routes_corpus.py:
torch.jit.load's TorchScript, numpy.load's object arrays, joblib.load's compressed
forms and inline array data, miniz's real limits). Each payload is harmless (it
would create a marker file); which loaders run it is measured by loading every
file under every loader in child processes (tests/ckpt/oracle.py). ``--real DIR``
adds checkpoints nobody here wrote (see docs/benchmarks.md for where they come from).
Then it runs over every file:

- torchwise (``torchwise.ckpt.scan`` in-process, and the ``torchwise ckpt scan`` CLI)
- picklescan (CLI, default and ``--strict``), modelscan (CLI), fickling (``--check-safety``)
- ``torch.serialization.get_unsafe_globals_in_checkpoint`` (in-process)

and prints a detection table (hostile caught, benign flagged, errors) with the
median time per file, a per-technique matrix, and scan time against tensor
payload size. ``--live`` first proves, in throwaway processes, that every hostile
file really runs its payload when loaded.

    python bench/ckpt_scan.py [--live] [--sizes 1,64,512]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "ckpt"))

import torch  # noqa: E402
from ckpt_corpus import Hostile, build_benign, build_hostile  # noqa: E402
from differential import torch_outcomes, write_cases  # noqa: E402
from oracle import LOADERS, load_everywhere  # noqa: E402
from routes_corpus import BENIGN, HOSTILE, flatbuffer_module, route_cases  # noqa: E402
from tricks import trick_cases  # noqa: E402

from torchwise.ckpt import scan  # noqa: E402

BIN = Path(sys.executable).parent
FLAGGED, CLEAN, ERROR = "flagged", "clean", "error"
Outcome = tuple[str, float]  # (flagged|clean|error, seconds)


def _cli(argv: list[str], codes: dict[int, str]) -> Callable[[Path], Outcome]:
    def run(path: Path) -> Outcome:
        start = time.perf_counter()
        proc = subprocess.run([*argv, str(path)], capture_output=True, cwd=path.parent)
        return codes.get(proc.returncode, ERROR), time.perf_counter() - start

    return run


def _torchwise_api(path: Path) -> Outcome:
    start = time.perf_counter()
    verdicts = {f.verdict for f in scan(path).files}
    took = time.perf_counter() - start
    if "unsafe" in verdicts:
        return FLAGGED, took
    return (ERROR if "error" in verdicts else CLEAN), took


def _torch_builtin(path: Path) -> Outcome:
    start = time.perf_counter()
    try:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:
        return ERROR, time.perf_counter() - start
    return (FLAGGED if unsafe else CLEAN), time.perf_counter() - start


# picklescan: 1 dangerous globals, 2 scan error. modelscan: 1 issues, 2 error, 3 no supported
# files (nothing scanned: counted clean). fickling: 1 unsafe, other non-zero codes are errors.
TOOLS: dict[str, Callable[[Path], Outcome]] = {
    "torchwise (API)": _torchwise_api,
    "torchwise (CLI)": _cli([str(BIN / "torchwise"), "ckpt", "scan"], {0: CLEAN, 1: FLAGGED}),
    "picklescan": _cli([str(BIN / "picklescan"), "-p"], {0: CLEAN, 1: FLAGGED}),
    "picklescan --strict": _cli(
        [str(BIN / "picklescan"), "--strict", "-p"], {0: CLEAN, 1: FLAGGED}
    ),
    "modelscan": _cli([str(BIN / "modelscan"), "-p"], {0: CLEAN, 1: FLAGGED, 3: CLEAN}),
    "fickling": _cli([str(BIN / "fickling"), "--check-safety"], {0: CLEAN, 1: FLAGGED}),
    "torch get_unsafe_globals": _torch_builtin,
}


def _files(path: Path) -> list[Path]:
    """A sharded checkpoint is judged shard by shard (not every tool takes a directory)."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".bin", ".safetensors"))
    return [path]


def _judge(tool: Callable[[Path], Outcome], path: Path) -> Outcome:
    outcomes = [tool(p) for p in _files(path)]
    kinds = {o for o, _ in outcomes}
    worst = FLAGGED if FLAGGED in kinds else ERROR if ERROR in kinds else CLEAN
    return worst, sum(t for _, t in outcomes)


def _live_check(hostile: list[Hostile], marker: Path) -> None:
    """Load every hostile file the way a victim would, in a child process."""
    print("## payloads are live (each loaded in a throwaway process)\n")
    live = 0
    for case in hostile:
        if case.trigger == "torch.load":
            code = f"import torch; torch.load({str(case.path)!r}, weights_only=False)"
        elif case.trigger == "pickle.load":
            code = f"import pickle; pickle.load(open({str(case.path)!r}, 'rb'))"
        else:
            member = case.trigger.split(":", 1)[1]
            code = (
                "import io, pickle, zipfile, torch\n"
                f"d = zipfile.ZipFile({str(case.path)!r}).read({member!r})\n"
                "torch.load(io.BytesIO(d), weights_only=False) if d[:2] == b'PK' "
                "else pickle.loads(d)"
            )
        subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=marker.parent)
        live += marker.exists()
        print(f"- {case.technique}: {'runs' if marker.exists() else 'DID NOT RUN'}")
        marker.unlink(missing_ok=True)
    print(f"\n{live}/{len(hostile)} payloads run when loaded.\n")


def _tricks(root: Path) -> tuple[list[Hostile], dict[str, bool]]:
    """The evasion tricks as hostile files, and whether torch.load runs each (measured)."""
    cases, _ = trick_cases(root)
    paths = write_cases(root, cases)
    outcomes = torch_outcomes(root, paths)
    hostile = [Hostile(f"trick: {name}", path, "") for name, path in paths.items()]
    return hostile, {f"trick: {name}": outcome.ran for name, outcome in outcomes.items()}


def _routes(root: Path) -> tuple[list[Hostile], dict[str, Path], dict[str, bool]]:
    """The loader-route cases: hostile ones (with whether any loader runs each, measured under
    every loader) and benign ones."""
    root.mkdir(parents=True, exist_ok=True)
    marker = root / "markers" / "RAN"
    cases = [c for c in route_cases(str(marker), flatbuffer_module(str(marker)))
             if c.kind in (HOSTILE, BENIGN)]  # fmt: skip
    paths = {}
    for case in cases:
        paths[case.name] = root / (case.name.replace(" ", "_") + ".bin")
        paths[case.name].write_bytes(case.data)
    outcomes = load_everywhere(paths, marker, LOADERS)
    hostile = [Hostile(f"route: {c.name}", paths[c.name], "") for c in cases if c.kind == HOSTILE]
    benign = {f"route: {c.name}": paths[c.name] for c in cases if c.kind == BENIGN}
    runs = {f"route: {c.name}": bool(outcomes[c.name].runs_under) for c in cases}
    return hostile, benign, runs


def _more_benign(root: Path) -> dict[str, Path]:
    """Plain values weights_only loads or that are inert, a tar checkpoint, a .pt2."""
    sys.path.insert(0, str(ROOT / "tests" / "ckpt"))
    from craft import simple_tar_checkpoint

    root.mkdir(parents=True, exist_ok=True)
    out = {}
    values = {"set": {1, 2}, "frozenset": frozenset({3}), "complex": 1 + 2j, "range": range(4),
              "slice": slice(1, 9), "bytearray": bytearray(b"x"), "bytes": b""}  # fmt: skip
    for name, value in values.items():
        out[name] = root / f"{name}.pt"
        torch.save({"w": torch.ones(2), "v": value}, out[name])
    out["pre-1.0 tar checkpoint"] = root / "old_tar.pt"
    out["pre-1.0 tar checkpoint"].write_bytes(simple_tar_checkpoint())

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x)

    out["torch.export .pt2"] = root / "net.pt2"
    torch.export.save(torch.export.export(Net(), (torch.randn(1, 3),)), out["torch.export .pt2"])
    return out


def _detection(hostile: list[Hostile], benign: dict[str, Path], runs: dict[str, bool]) -> None:
    results: dict[str, dict[str, Outcome]] = {name: {} for name in TOOLS}
    for name, tool in TOOLS.items():
        tool(benign["state dict"])  # warm-up: imports, page cache
        for case in hostile:
            results[name][case.technique] = _judge(tool, case.path)
        for kind, path in benign.items():
            results[name][f"benign: {kind}"] = _judge(tool, path)
    n_h, n_b = len(hostile), len(benign)
    live = [c for c in hostile if runs.get(c.technique, True)]
    print(f"## detection: {n_h} hostile files ({len(live)} run their payload under some "
          f"loader), {n_b} benign checkpoints\n")  # fmt: skip
    print("| tool | live payloads caught | hostile caught | missed | errors on hostile "
          "| benign flagged (FP) | errors on benign | median time / file |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    medians = {n: statistics.median(t for _, t in per.values()) for n, per in results.items()}
    for name, per_file in results.items():
        h = [per_file[c.technique][0] for c in hostile]
        b = [per_file[f"benign: {k}"][0] for k in benign]
        # Ratios compare like with like: CLIs (process start included) with torchwise's CLI,
        # in-process calls with torchwise's API.
        in_process = name in ("torchwise (API)", "torch get_unsafe_globals")
        base = "torchwise (API)" if in_process else "torchwise (CLI)"
        ratio = "" if name == base else f" ({medians[name] / medians[base]:.1f}x torchwise)"
        caught_live = sum(per_file[c.technique][0] == FLAGGED for c in live)
        print(
            f"| {name} | {caught_live}/{len(live)} | {h.count(FLAGGED)}/{n_h} | {h.count(CLEAN)} "
            f"| {h.count(ERROR)} | {b.count(FLAGGED)}/{n_b} | {b.count(ERROR)} "
            f"| {_ms(medians[name])}{ratio} |"
        )
    print("\n## per technique (F flagged, . missed, E error; * the payload runs under a loader)\n")
    names = list(TOOLS)
    print("| technique | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    mark = {FLAGGED: "F", CLEAN: ".", ERROR: "E"}
    for label in [c.technique for c in hostile] + [f"benign: {k}" for k in benign]:
        row = " | ".join(mark[results[n][label][0]] for n in names)
        star = "*" if runs.get(label, not label.startswith("benign")) else ""
        print(f"| {label}{star} | {row} |")
    print()
    peers = [n for n in names if not n.startswith("torchwise")]
    beyond = [c.technique for c in hostile
              if results["torchwise (API)"][c.technique][0] != FLAGGED
              and any(results[p][c.technique][0] == FLAGGED for p in peers)]  # fmt: skip
    print(f"Hostile files some peer flags and torchwise does not: {len(beyond)}"
          + (f" ({', '.join(beyond)})" if beyond else "") + "\n")  # fmt: skip


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 0.01 else f"{seconds * 1000:.0f} ms"


def _size_independence(root: Path, sizes: list[float]) -> None:
    print("## scan time against tensor payload size (median of 5 runs)\n")
    tools = ["torchwise (API)", "torchwise (CLI)", "picklescan", "modelscan",
             "torch get_unsafe_globals"]  # fmt: skip
    print("| payload | file size | " + " | ".join(tools) + " |")
    print("|---" * (len(tools) + 2) + "|")
    for mib in sizes:
        folder = root / f"size_{mib:g}"
        path = build_benign(folder, payload_mib=mib)["state dict"]
        cells = []
        for name in tools:
            times = [TOOLS[name](path)[1] for _ in range(5 if mib < 1024 else 3)]
            cells.append(_ms(statistics.median(times)))
        print(
            f"| {mib:g} MiB | {path.stat().st_size / 2**20:.1f} MiB | " + " | ".join(cells) + " |"
        )
        shutil.rmtree(folder)
    print()


def _real(directory: Path) -> None:
    """Checkpoints nobody here wrote: each tool's verdict, and torch's weights_only load."""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    print(f"## real third-party checkpoints ({len(files)} files under {directory})\n")
    names = ["torchwise (API)", "picklescan", "modelscan", "fickling", "torch get_unsafe_globals"]
    print("| file | weights_only load | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 2) + "|")
    mark = {FLAGGED: "flagged", CLEAN: "clean", ERROR: "error"}
    for path in files:
        try:
            torch.load(path, map_location="cpu", weights_only=True)
            loads = "loads"
        except Exception as exc:
            loads = (
                "refuses" if "Unsupported global" in str(exc) else f"fails ({type(exc).__name__})"
            )
        row = " | ".join(mark[TOOLS[n](path)[0]] for n in names)
        print(f"| {path.relative_to(directory)} | {loads} | {row} |")
    print()


_BOMB_SCAN = """
import sys, time
from pathlib import Path
from torchwise.ckpt.scan import scan_file
start = time.perf_counter()
result = scan_file(Path(sys.argv[1]))
took = time.perf_counter() - start
# VmHWM: this process's peak (ru_maxrss would keep the parent's across exec)
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(result.verdict, took, hwm.split()[1])
"""


def _bombs(root: Path) -> None:
    """Zip bombs: 200 KiB files that inflate to 200 MiB of one opcode. Median of 3 runs."""
    from test_ckpt_budgets import deflate_bomb

    print("## zip bombs (200 MiB of one opcode in a 200 KiB data.pkl)\n")
    print("| bomb | file | verdict | wall (median of 3) | peak RSS |")
    print("|---|---|---|---|---|")
    bombs = ((b"(", "MARK"), (b"N", "NONE"), (b"]", "EMPTY_LIST"), (b"}", "EMPTY_DICT"),
             (b"cos\nsystem\n0", "GLOBAL"))  # fmt: skip
    for unit, label in bombs:
        path = deflate_bomb(root / f"bomb_{label}.pt", unit, 200 << 20)
        runs = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", _BOMB_SCAN, str(path)],
                                 capture_output=True, text=True, check=True)  # fmt: skip
            verdict, took, rss = out.stdout.split()
            runs.append((float(took), int(rss)))
        took = statistics.median(t for t, _ in runs)
        rss = max(r for _, r in runs) / 1024
        print(f"| {label} | {path.stat().st_size >> 10} KiB | {verdict} | {took:.2f} s "
              f"| {rss:.0f} MiB |")  # fmt: skip
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", action="store_true", help="prove each payload runs when loaded")
    parser.add_argument("--sizes", default="1,64,512,2048", help="tensor payload sizes in MiB")
    parser.add_argument("--real", type=Path, help="a directory of third-party checkpoints")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-") as tmp:
        root = Path(tmp)
        marker = root / "PAYLOAD_RAN"
        hostile = build_hostile(root / "hostile", marker)
        benign = build_benign(root / "benign")
        benign.update(_more_benign(root / "benign_more"))
        print(f"torch {torch.__version__}, Python {sys.version.split()[0]}\n")
        if args.live:
            _live_check(hostile, marker)
        tricks, runs = _tricks(root / "tricks")
        routes, route_benign, route_runs = _routes(root / "routes")
        benign.update(route_benign)
        _detection(hostile + tricks + routes, benign, {**runs, **route_runs})
        assert not marker.exists(), "a scanner ran a payload"
        if args.real:
            _real(args.real)
        _bombs(root)
        _size_independence(root, [float(s) for s in args.sizes.split(",")])


if __name__ == "__main__":
    main()
