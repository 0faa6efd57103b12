"""Per-step overhead of ``torchwise run`` against plain ``python`` on real training scripts.

Method
------
Every optimizer step is timed the same way in both modes: a ``sitecustomize.py``
written to a temporary directory on ``PYTHONPATH`` waits for
``torch.optim.optimizer`` to be imported, then registers a global
``register_optimizer_step_post_hook`` that appends ``time.perf_counter()`` to
``$TWB_STEP_DIR/<pid>.txt``. ``torchwise run`` starts the script in a child
(``python -m torchwise.run.child``) whose environment is the parent's, with
``PYTHONPATH`` extended, so the hook is loaded there too; each run checks that
its step file was written by ``torchwise/run/child.py`` (tool) or by the script
(plain). The hook is registered before torchwise's own post-step hook, so the
tool's post-step work falls into the next interval, as all the rest of its
per-step work does.

Step time is the difference of consecutive step timestamps, dropping the first
two intervals (warm-up). Each script gets the same step budget in both modes:
the tool runs with ``--steps N --epochs 1`` (its budget), and the plain run ends
after the same N steps (by the script's own arguments where it has them, else
the hook exits the process right after step N). Only the first N timestamps of a
run are used.

Each script runs ``--rounds`` times (default 5), interleaved plain, tool, plain,
tool ... on the same machine state, both with the same interpreter
(``/work/corpus/run2/venv/bin/python``, which has the scripts' packages; the tool
is this repository's ``src`` on ``PYTHONPATH``) and the same environment, with
``OMP_NUM_THREADS=1`` by default (``--threads``): on a shared 2-core machine two
intra-op threads make a step's time swing by 10-20x with other processes' load,
which swamps the ratio. A round's
ratio is the tool's median step over the plain run's median step; a script's
figure is the median of its round ratios; the headline is the median over
scripts.

The scripts are the clean copies of real repositories in
``/work/corpus/run2/plant/*/clean`` (synthetic data beside them), copied to a
temporary directory first so that nothing there changes.

    env -u PYTHONDONTWRITEBYTECODE python bench/run_overhead.py [--rounds 5] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CORPUS = Path("/work/corpus/run2")
PYTHON = CORPUS / "venv" / "bin" / "python"
#: warm-up intervals dropped from every run
WARMUP = 2

SITECUSTOMIZE = '''\
"""Bench step timer: after each optimizer step, append time.perf_counter() to
$TWB_STEP_DIR/<pid>.txt; with $TWB_STOP_AFTER, exit right after that many steps."""
import os
import sys

_DIR = os.environ.get("TWB_STEP_DIR")


def _install():
    import time

    from torch.optim.optimizer import register_optimizer_step_post_hook

    out = open(os.path.join(_DIR, f"{os.getpid()}.txt"), "a", buffering=1)
    out.write("# " + " ".join(sys.argv) + "\\n")
    limit = int(os.environ.get("TWB_STOP_AFTER") or 0)
    count = [0]
    clock = time.perf_counter

    def hook(optimizer, args, kwargs):
        out.write(repr(clock()) + "\\n")
        count[0] += 1
        if limit and count[0] >= limit:
            out.flush()
            os._exit(0)

    register_optimizer_step_post_hook(hook)


if _DIR:
    import importlib.abc
    import importlib.util

    class _AfterOptimizer(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch.optim.optimizer":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            original = spec.loader.exec_module

            def exec_module(module):
                original(module)
                _install()

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _AfterOptimizer())
'''

LTSF_DLINEAR = (
    "--is_training", "1", "--root_path", "./dataset/", "--data_path", "exchange_rate.csv",
    "--model_id", "Exchange_336_96", "--model", "DLinear", "--data", "custom", "--features", "M",
    "--seq_len", "336", "--pred_len", "96", "--enc_in", "8", "--des", "Exp", "--itr", "1",
    "--batch_size", "8", "--learning_rate", "0.0005", "--train_epochs", "1",
)  # fmt: skip
LTSF_TRANSFORMER = (
    "--is_training", "1", "--root_path", "./dataset/", "--data_path", "exchange_rate.csv",
    "--model_id", "exchange_96_96", "--model", "Transformer", "--data", "custom",
    "--features", "M", "--seq_len", "96", "--label_len", "48", "--pred_len", "96",
    "--e_layers", "2", "--d_layers", "1", "--factor", "3", "--enc_in", "8", "--dec_in", "8",
    "--c_out", "8", "--des", "Exp", "--itr", "1", "--train_epochs", "1",
)  # fmt: skip
BERT_ARGS = (
    "-c", "data/corpus.small", "-t", "data/corpus.test", "-v", "data/vocab.small",
    "-o", "output/bert.model", "-e", "1",
)  # fmt: skip


@dataclass(frozen=True)
class Script:
    name: str
    #: the clean copy, under /work/corpus/run2/plant
    repo: str
    #: the script (a path in the copy, or an executable such as a console script)
    script: str
    #: optimizer steps per run, both modes
    steps: int
    args: tuple[str, ...] = ()
    #: the plain run stops itself after ``steps`` (by ``args``); else the hook stops it
    stops_itself: bool = False
    #: the copy's directory goes on PYTHONPATH (a console script importing its package)
    path_dot: bool = False
    #: left out unless named with --only (too slow on this machine for the default run)
    slow: bool = False


SCRIPTS = (
    Script("frozen-lake-dql", "johnnycode8+gym_solutions", "frozen_lake_dql.py", 30),
    Script("frozen-lake-dql-cnn", "johnnycode8+gym_solutions", "frozen_lake_dql_cnn.py", 25),
    Script("cliff-reinforce", "johnnycode8+gym_solutions", "cliff_walking_reinforce.py", 8),
    Script(
        "gin-mutag",
        "weihua916+powerful-gnns",
        "main.py",
        15,
        ("--epochs", "1", "--iters_per_epoch", "15"),
        stops_itself=True,
    ),
    Script("ltsf-dlinear", "cure-lab+LTSF-Linear", "run_longExp.py", 25, LTSF_DLINEAR),
    Script(
        "ltsf-transformer", "cure-lab+LTSF-Linear", "run_longExp.py", 7, LTSF_TRANSFORMER, slow=True
    ),
    Script(
        "bert",
        "codertimo+BERT-pytorch",
        str(CORPUS / "venv" / "bin" / "bert"),
        5,
        BERT_ARGS,
        path_dot=True,
        slow=True,
    ),
)


@dataclass
class Run:
    steps: list[float]  # step intervals (s), warm-up dropped
    wall: float
    rc: int
    report: dict | None = None


#: OMP/MKL threads in both modes ("" leaves torch's default); set by --threads
THREADS = {"value": ""}


def _environment(site: Path, step_dir: Path, script: Script, copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if THREADS["value"]:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = THREADS["value"]
    paths = [str(SRC), str(site)] + ([str(copy)] if script.path_dot else [])
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        TWB_STEP_DIR=str(step_dir),
        MPLBACKEND="Agg",
        SDL_VIDEODRIVER="dummy",
        PYTHONUNBUFFERED="1",
    )
    return env


def _timestamps(step_dir: Path, tool: bool) -> list[float]:
    files = sorted(step_dir.glob("*.txt"))
    if len(files) != 1:
        raise RuntimeError(f"expected one step file in {step_dir}, found {len(files)}")
    lines = files[0].read_text().splitlines()
    header = lines[0]
    if tool != ("torchwise/run/child.py" in header):
        raise RuntimeError(f"step file written by the wrong process: {header}")
    return [float(line) for line in lines[1:] if line and not line.startswith("#")]


def run_one(script: Script, copy: Path, site: Path, scratch: Path, *, tool: bool) -> Run:
    step_dir = Path(tempfile.mkdtemp(dir=scratch, prefix="steps-"))
    env = _environment(site, step_dir, script, copy)
    target = script.script
    report_path = step_dir / "report.json"
    if tool:
        command = [
            str(PYTHON), "-m", "torchwise", "run", "--steps", str(script.steps), "--epochs", "1",
            "--format", "json", "-o", str(report_path), "--exit-zero", "--quiet", target,
        ]  # fmt: skip
        if script.args:
            command += ["--", *script.args]
    else:
        command = [str(PYTHON), target, *script.args]
        if not script.stops_itself:
            env["TWB_STOP_AFTER"] = str(script.steps)
    log = step_dir / "output.log"
    start = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.run(
            command, cwd=copy, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=900
        ).returncode
    wall = time.perf_counter() - start
    stamps = _timestamps(step_dir, tool)[: script.steps]
    if len(stamps) < script.steps:
        mode = "tool" if tool else "plain"
        tail = log.read_text()[-2000:]
        raise RuntimeError(f"{script.name} ({mode}): {len(stamps)} steps\n{tail}")
    intervals = [b - a for a, b in itertools.pairwise(stamps)][WARMUP:]
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return Run(intervals, wall, rc, report)


def measure(script: Script, rounds: int, scratch: Path, site: Path) -> dict:
    copy = scratch / script.name
    shutil.copytree(CORPUS / "plant" / script.repo / "clean", copy, symlinks=True)
    plain: list[Run] = []
    tool: list[Run] = []
    for number in range(rounds):
        for is_tool, runs in ((False, plain), (True, tool)):
            result = run_one(script, copy, site, scratch, tool=is_tool)
            runs.append(result)
            print(
                f"  {script.name} round {number + 1} {'tool ' if is_tool else 'plain'}: "
                f"median step {1000 * statistics.median(result.steps):.2f} ms, "
                f"wall {result.wall:.1f} s, rc {result.rc}",
                file=sys.stderr,
                flush=True,
            )
    ratios = [
        statistics.median(t.steps) / statistics.median(p.steps)
        for p, t in zip(plain, tool, strict=True)
    ]
    report = tool[-1].report or {}
    return {
        "script": script.name,
        "steps": script.steps,
        "plain_ms": 1000 * statistics.median(statistics.median(r.steps) for r in plain),
        "tool_ms": 1000 * statistics.median(statistics.median(r.steps) for r in tool),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "tool_self_ms": 1000 * (report.get("run", {}).get("median_step_seconds") or 0.0),
        "findings": report.get("summary", {}).get("by_code", {}),
        "plain_wall_s": statistics.median(r.wall for r in plain),
        "tool_wall_s": statistics.median(r.wall for r in tool),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", nargs="*", help="script names (includes slow ones)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--threads",
        default="1",
        help="OMP_NUM_THREADS for both modes ('' for torch's default); 1 keeps a step's time "
        "from swinging when other processes share the cores",
    )
    options = parser.parse_args()
    THREADS["value"] = options.threads
    chosen = [s for s in SCRIPTS if (s.name in options.only if options.only else not s.slow)]
    rows = []
    print(f"load average at start: {os.getloadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="twb-overhead-") as scratch_name:
        scratch = Path(scratch_name)
        site = scratch / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        for script in chosen:
            try:
                rows.append(measure(script, options.rounds, scratch, site))
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                print(f"skipped {script.name}: {error}", file=sys.stderr)
    print(f"load average at end: {os.getloadavg()}", file=sys.stderr)
    print("| script | steps | plain median step ms | tool median step ms | ratio | round ratios |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        rounds = ", ".join(f"{r:.2f}" for r in row["ratios"])
        print(
            f"| {row['script']} | {row['steps']} | {row['plain_ms']:.2f} | {row['tool_ms']:.2f} "
            f"| {row['ratio']:.2f} | {rounds} |"
        )
    if rows:
        overall = statistics.median(r["ratio"] for r in rows)
        print(f"\nmedian ratio over {len(rows)} scripts: {overall:.2f}")
    if options.out:
        options.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
