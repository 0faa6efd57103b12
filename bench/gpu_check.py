"""The one-command GPU check: tune against an exhaustive sweep, inspect's memory, doctor, run.

    PYTHONPATH=src python3 bench/gpu_check.py --out DIR        # on a CUDA machine, ~6 min
    PYTHONPATH=src python3 bench/gpu_check.py --out DIR --dry-run   # CPU, tiny models

Sections, each in its own process with its own time box, each writing its JSON
into DIR as soon as it has it (a timeout or a crash in one leaves the others):

- ``env.json``: the GPU, its compute capability, torch and CUDA versions.
- ``memory.json``: inspect's training-memory estimate (``torchwise.model.summarize``
  on the meta device) against ``torch.cuda.max_memory_allocated`` over one real
  AdamW step, for ResNet-50 (batch 32) and GPT-2 (8 x 512).
- ``resnet50.json``, ``gpt2.json``: ``torchwise.tune`` on the workload first (its
  report in ``tune_<name>.json`` and ``.txt``), then every GPU knob and every
  compatible pair of them timed as one full AdamW step with CUDA events
  (bench/_gpu_sweep.py, written apart from tune's step; pairs in the order their
  singles predict fastest, until the box runs out) and which of them train
  correctly, then tune's pick and the sweep's best timed again side by side: the
  ratio of their step times, and every knob tune called incorrect although the
  sweep trains it.
- ``cuda_tests.json``: tests/tune/test_cuda.py (every CUDA knob on a tiny conv net,
  the oracle on CUDA graphs, fp16 + GradScaler, TF32), when pytest is installed.
- ``doctor/`` and ``run/``: bench/gpu_doctor.py and bench/gpu_run.py, when they
  exist, each run as ``--out DIR/<name>``.

At the end it prints the GPU's name and the ratios, and writes ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: section -> seconds it may take (sum 335 s: the whole check stays within 6 minutes)
BOXES = {
    "env": 15, "memory": 35, "resnet50": 100, "gpt2": 90, "cuda_tests": 30, "doctor": 45, "run": 35,
}  # fmt: skip
#: the whole check's wall time: time the sections leave is given to doctor and run
TOTAL_S = 350
#: the dry run's boxes: CPU, tiny models, a loaded test machine
DRY_BOXES = {"env": 30, "memory": 40, "resnet50": 45, "gpt2": 45, "cuda_tests": 60}
WITHIN = 0.10  # tune's pick must be within 10% of the sweep's best step time


def write_json(path: Path, data: Any) -> None:
    """Atomically: a section killed mid-write leaves the previous version."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


# -- workloads --------------------------------------------------------------------


def workload(name: str, dry: bool) -> dict[str, Any]:
    """The model (on CPU), a host batch (inputs, target) and whether it is a conv net."""
    import torch

    from torchwise import zoo

    torch.manual_seed(0)
    if name.startswith("resnet"):
        if dry:  # a tiny conv net with BatchNorm: every path, in seconds on a CPU
            model = torch.nn.Sequential(
                torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10),
            )  # fmt: skip
            inputs, classes = torch.randn(8, 3, 16, 16), 10
        else:
            model = zoo.get("resnet50").build()
            inputs, classes = torch.randn(32 if name.endswith("memory") else 64, 3, 224, 224), 1000
        target = torch.randint(0, classes, (inputs.shape[0],))
        return {"model": model, "inputs": inputs, "target": target, "conv": True}
    from torchwise.zoo.gpt2 import GPT2

    if dry:
        model, shape, vocab = GPT2(256, 32, 1, 2, 32), (2, 16), 256
    else:
        model, shape, vocab = zoo.get("gpt2").build(), (8, 512), 50257
    inputs = torch.randint(0, vocab, shape)
    return {
        "model": model,
        "inputs": inputs,
        "target": torch.randint(0, vocab, shape),
        "conv": False,
    }


def _device(dry: bool) -> Any:
    import torch

    return torch.device("cpu" if dry else "cuda")


# -- sections ---------------------------------------------------------------------


def section_env(out: Path, dry: bool, deadline: float) -> None:
    import torch

    data: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "dry_run": dry,
    }
    if dry:
        data["gpu"] = f"none (dry run on {platform.processor() or platform.machine()})"
    else:
        props = torch.cuda.get_device_properties(0)
        data |= {
            "gpu": torch.cuda.get_device_name(0),
            "capability": list(torch.cuda.get_device_capability(0)),
            "memory_bytes": props.total_memory,
            "devices": torch.cuda.device_count(),
        }
    write_json(out / "env.json", data)


def _measured_peak(model: Any, inputs: Any, target: Any, dry: bool) -> int:
    """Peak bytes of one AdamW step (after a first step created the optimizer state)."""
    import torch
    import torch.nn.functional as F

    device = _device(dry)
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    x, y = inputs.to(device), target.to(device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        out = model(x)
        F.cross_entropy(out.flatten(0, -2), y.flatten()).backward()
        optimizer.step()

    step()
    if dry:
        from torchwise.tune.memory import live_training_state, measure_step_memory

        optimizer.zero_grad(set_to_none=True)
        state = lambda: live_training_state(model, optimizer)  # noqa: E731
        return measure_step_memory(step, device, state).peak
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def section_memory(out: Path, dry: bool, deadline: float) -> None:
    import torch

    from torchwise.model import summarize

    rows: dict[str, Any] = {}
    for name in ("resnet50-memory", "gpt2"):
        if time.monotonic() > deadline:
            rows[name] = {"error": "not measured: the section's time box ran out"}
            continue
        spec = workload(name, dry)
        try:
            summary = summarize(spec["model"], (spec["inputs"],), device="meta")
            assert summary.training is not None
            estimate = summary.training.total("adamw")
            measured = _measured_peak(spec["model"], spec["inputs"], spec["target"], dry)
            rows[name] = {
                "batch": list(spec["inputs"].shape),
                "estimate_bytes": estimate,
                "estimate": summary.training.to_dict(),
                "measured_peak_bytes": measured,
                "estimate_over_measured": estimate / measured if measured else None,
            }
        except Exception as exc:
            rows[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        write_json(out / "memory.json", rows)
        del spec
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _run_tune(name: str, spec: dict[str, Any], out: Path, dry: bool, budget_s: float) -> Any:
    """torchwise.tune on the workload; its report as JSON and text in ``out``."""
    from torchwise.tune import SessionConfig, tune

    session = SessionConfig(min_rounds=8, max_rounds=12, budget_s=2.0) if dry else SessionConfig()
    report = tune(
        spec["model"],
        spec["inputs"],
        target=spec["target"],
        device=str(_device(dry)),
        budget_s=budget_s,
        session=session,
        profile=False,
        # the dry run exercises the paths, not every CPU knob
        knobs=["channels-last", "bf16-autocast", "fused-optimizer"] if dry else None,
        name=name,
        notify=lambda line: print(f"[{name}] {line}", flush=True),
    )
    data = report.to_dict()
    write_json(out / f"tune_{name}.json", data)
    (out / f"tune_{name}.txt").write_text(report.render("text"))
    return data


def _sweep(
    model: Any,
    spec: dict[str, Any],
    dry: bool,
    until: float,
    save: Callable[[list[Any], list[str]], None],
) -> list[Any]:
    """Every knob alone, then the pairs the singles predict fastest first, until ``until``."""
    import _gpu_sweep as sweep

    batch = (spec["inputs"], spec["target"])
    steps = 2 if dry else 6
    sweep.measure(model, batch, frozenset(), steps=steps)  # lazy initialisation, untimed
    combos = sweep.combinations(spec["conv"])
    singles = [c for c in combos if len(c) <= 1]
    pairs = [c for c in combos if len(c) > 1]
    if dry:  # the paths, not the whole sweep: every knob alone and a few pairs
        pairs = pairs[:3]
    rows: list[Any] = []
    skipped: list[str] = []

    def measure_all(todo: list[frozenset[str]]) -> None:
        for combo in todo:
            if time.monotonic() > until:
                skipped.append(sweep.label(combo))
                continue
            rows.append(sweep.measure(model, batch, combo, steps=steps))
            sweep.judge_training(rows)
            save(rows, skipped)

    measure_all(singles)
    alone = {next(iter(r.combo)): r.step_s for r in rows if len(r.combo) == 1 and r.step_s}
    base_s = rows[0].step_s if rows and rows[0].step_s else 1.0
    pairs.sort(key=lambda c: math.prod((alone.get(k) or base_s) / base_s for k in c))
    measure_all(pairs)
    save(rows, skipped)
    return rows


def section_workload(name: str, out: Path, dry: bool, deadline: float) -> None:
    """tune first (its report is the subject), then the sweep, then pick against best."""
    import gc

    import torch

    import _gpu_sweep as sweep

    spec = workload(name, dry)
    device = _device(dry)
    path = out / f"{name}.json"
    result: dict[str, Any] = {"workload": name, "batch": list(spec["inputs"].shape)}
    write_json(path, result)
    started = time.monotonic()
    budget = 2.0 if dry else max(5.0, min(30.0, 0.3 * (deadline - started)))
    tune_started = time.monotonic()
    data = _run_tune(name, spec, out, dry, budget)
    tune_ids = {v: k for k, v in sweep.KNOBS.items()}
    accepted = [part for r in data["recommendations"] for part in r["knob"].split("+")]
    pick = frozenset(tune_ids[k] for k in accepted if k in tune_ids)  # pairs: both parts
    result["tune"] = {
        "elapsed_s": time.monotonic() - tune_started,
        "budget_s": data["method"]["budget_s"],
        "recommendations": [r["knob"] for r in data["recommendations"]],
        "pick": sorted(pick),
        "statuses": {t["knob"]: t["status"] for t in data["trials"]},
        "checks": {t["knob"]: (t["check"] or {}).get("summary") for t in data["trials"]},
        "not_applicable": {
            t["knob"]: t["not_applicable"] for t in data["trials"] if t.get("not_applicable")
        },
    }
    write_json(path, result)
    del data
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

    model = spec["model"].to(device)

    def save(rows: list[Any], skipped: list[str]) -> None:
        result["sweep"] = [r.to_dict(rows[0].step_s if rows else None) for r in rows]
        result["sweep_not_measured"] = skipped
        write_json(path, result)

    rows = _sweep(model, spec, dry, deadline - (3 if dry else 12), save)
    fine = [r for r in rows if r.step_s is not None and r.trains]
    best = min(fine, key=lambda r: r.step_s or 0.0, default=None)
    base = rows[0].step_s if rows else None
    result["best"] = best.to_dict(base) if best is not None else None
    by_knob = {next(iter(r.combo)): r for r in rows if len(r.combo) == 1}
    result["false_incorrect"] = [
        {"knob": knob, "status": status, "sweep_losses": by_knob[k].losses}
        for knob, status in result["tune"]["statuses"].items()
        if status in ("incorrect", "failed")
        and (k := tune_ids.get(knob)) is not None
        and k in by_knob
        and by_knob[k].trains
    ]
    write_json(path, result)
    if best is not None and time.monotonic() < deadline - 3:
        combos = [pick, best.combo] if pick != best.combo else [pick]
        batch = (spec["inputs"], spec["target"])
        times = sweep.retime(model, batch, combos, rounds=1 if dry else 2, steps=2 if dry else 6)
        pick_s, best_s = times[sweep.label(pick)], times[sweep.label(best.combo)]
        ratio = pick_s / best_s if pick_s and best_s else None
        result["pick_vs_best"] = {
            "pick": sweep.label(pick),
            "best": sweep.label(best.combo),
            "pick_step_s": pick_s,
            "best_step_s": best_s,
            "time_ratio": ratio,
            "within_10_percent": ratio is not None and ratio <= 1 + WITHIN,
        }
        write_json(path, result)


def section_cuda_tests(out: Path, dry: bool, deadline: float) -> None:
    """tests/tune/test_cuda.py (the CUDA paths on a tiny model), when pytest is installed."""
    import contextlib
    import io

    try:
        import pytest
    except ImportError:
        write_json(out / "cuda_tests.json", {"skipped": "pytest is not installed here"})
        return
    test = HERE.parent / "tests" / "tune" / "test_cuda.py"
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        code = pytest.main([str(test), "-q", "-p", "no:cacheprovider", "-p", "no:randomly"])
    tail = sink.getvalue().strip().splitlines()[-15:]
    write_json(out / "cuda_tests.json", {"exit_code": int(code), "output": tail})


SECTIONS = {
    "env": section_env,
    "memory": section_memory,
    "resnet50": lambda out, dry, deadline: section_workload("resnet50", out, dry, deadline),
    "gpt2": lambda out, dry, deadline: section_workload("gpt2", out, dry, deadline),
    "cuda_tests": section_cuda_tests,
}


# -- the parent: time boxes and the summary -------------------------------------------


def run_boxed(command: list[str], box: float, log: Path) -> dict[str, Any]:
    """Run ``command`` in its own process group for at most ``box`` seconds."""
    started = time.monotonic()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent / "src"), str(HERE)]))
    with log.open("w") as sink:
        proc = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        try:
            code: int | None = proc.wait(timeout=box)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    return {
        "exit_code": code,
        "timed_out": code is None,
        "seconds": round(time.monotonic() - started, 1),
        "log": str(log),
    }


def run_external(
    out: Path,
    started: float,
    *,
    scale: float = 1.0,
    here: Path = HERE,
    on_each: Callable[[str, dict[str, Any]], None] = lambda name, result: None,
) -> dict[str, Any]:
    """bench/gpu_doctor.py and bench/gpu_run.py, where they exist, each with ``--out DIR/<name>``.

    Each gets its box, or its share of what the sections before it left of TOTAL_S.
    """
    runs: dict[str, Any] = {}
    external = [n for n in ("doctor", "run") if (here / f"gpu_{n}.py").exists()]
    for index, name in enumerate(external):
        script = here / f"gpu_{name}.py"
        left = TOTAL_S * scale - (time.monotonic() - started)
        box = max(BOXES[name] * scale, left / (len(external) - index))
        print(f"== {name}: {script.name} (up to {box:.0f} s)", flush=True)
        (out / name).mkdir(exist_ok=True)
        command = [sys.executable, str(script), "--out", str(out / name)]
        runs[name] = run_boxed(command, box, out / f"{name}.log")
        on_each(name, runs[name])
    return runs


def summarize(out: Path, runs: dict[str, Any]) -> list[str]:
    def load(name: str) -> dict[str, Any]:
        path = out / name
        return json.loads(path.read_text()) if path.exists() else {}

    env = load("env.json")
    lines = [f"GPU: {env.get('gpu', '?')} (capability {env.get('capability')}), "
             f"torch {env.get('torch')}, CUDA {env.get('cuda')}"]  # fmt: skip
    for name, row in load("memory.json").items():
        if "error" in row:
            lines.append(f"memory {name}: {row['error']}")
        else:
            lines.append(
                f"memory {name} {row['batch']}: inspect {row['estimate_bytes'] / 2**30:.2f} GiB, "
                f"measured {row['measured_peak_bytes'] / 2**30:.2f} GiB "
                f"(estimate/measured {row['estimate_over_measured']:.2f})"
            )
    for name in ("resnet50", "gpt2"):
        data = load(f"{name}.json")
        best, vs = data.get("best"), data.get("pick_vs_best")
        if not data:
            lines.append(f"{name}: no results ({runs.get(name)})")
            continue
        if best:
            lines.append(f"{name}: sweep best {best['label']} at {best['speedup']:.2f}x over fp32")
        tune_part = data.get("tune")
        if tune_part:
            lines.append(f"  tune recommends {tune_part['recommendations'] or 'nothing'}")
        if vs:
            ok = "yes" if vs["within_10_percent"] else "NO"
            ratio = vs["time_ratio"]
            lines.append(
                f"  tune's pick ({vs['pick']}) takes {ratio:.2f}x the best's step time "
                f"(within 10%: {ok})"
                if ratio
                else "  pick vs best: not timed"
            )
        wrong = data.get("false_incorrect")
        if wrong is not None:
            lines.append(
                "  called incorrect/failed although the sweep trains it: "
                + (", ".join(w["knob"] for w in wrong) or "none")
            )
    tests = load("cuda_tests.json")
    if tests:
        lines.append(f"tests/tune/test_cuda.py: {tests.get('output', [tests])[-1]}")
    for name in ("doctor", "run"):
        if name in runs:
            lines.append(f"{name}: {runs[name]}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny models, every path")
    parser.add_argument("--section", choices=sorted(SECTIONS), help=argparse.SUPPRESS)
    parser.add_argument("--box", type=float, default=60.0, help=argparse.SUPPRESS)
    # tests stretch every time box, so that no verdict depends on the machine's load
    parser.add_argument("--scale-boxes", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.section:
        SECTIONS[args.section](args.out, args.dry_run, time.monotonic() + args.box)
        return 0
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("error: no CUDA device here; use --dry-run to exercise the check on CPU")
        return 2
    runs: dict[str, Any] = {}
    started = time.monotonic()
    me = [sys.executable, str(Path(__file__).resolve())]

    def save(name: str, result: dict[str, Any]) -> None:
        runs[name] = result
        write_json(args.out / "runs.json", runs)

    for name in SECTIONS:
        box = (DRY_BOXES[name] if args.dry_run else BOXES[name]) * args.scale_boxes
        command = [*me, "--section", name, "--out", str(args.out), "--box", str(box - 5)]
        command += ["--dry-run"] if args.dry_run else []
        print(f"== {name} (up to {box:.0f} s)", flush=True)
        runs[name] = run_boxed(command, box, args.out / f"{name}.log")
        write_json(args.out / "runs.json", runs)
    if args.dry_run:
        print("== doctor, run: not in a dry run (their scripts need the GPU)")
    else:
        runs |= run_external(args.out, started, scale=args.scale_boxes, on_each=save)
    lines = summarize(args.out, runs)
    write_json(args.out / "summary.json", {"lines": lines, "runs": runs})
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
