"""doctor on real architectures the project had not run, five times over, beside torchtest.

The cases (bench/doctor_suite_cases.py) are 35 architectures written as command lines:
transformers and diffusers models at tiny configs (speech, contrastive, mixture of
experts, state space, diffusion, detection, dense prediction, language, vision,
forecasting) and model files of seven public GitHub repositories (a graph attention
network, a minimal Mamba, a Conformer, a sparse mixture of experts, improved
diffusion's UNet, a VQ-VAE, a temporal convolutional network), extracted from the
fetched mirrors at the commits listed there and never copied here. 25 planted bugs
(bench/doctor_suite_planted.py) sit on top of them.

What it measures:

- ``--runs N``: the whole suite on every healthy model and the meant check on every
  planted bug, through the Python API, in N fresh processes: false alarms per run,
  catches per run, and whether every verdict is identical across the runs;
- ``--cli``: each healthy model through ``torchwise doctor ... --format json``, its
  verdicts compared with the API's;
- ``--torchtest``: torchtest 0.5's suite (variables change, NaN, inf) on every case;
- ``--inspect``: ``torchwise inspect`` and ``torchwise doc`` on every healthy model,
  counting "internal error" endings;
- ``--speed``: the default suite on ResNet-50 (batch 4 at 224x224, the zoo's), three
  times from a fresh build, median seconds beside torchtest's suite on the same model.

    python bench/doctor_suite.py --mirror /work/.mirror --runs 5 --cli --torchtest --inspect \\
        [--only NAME,NAME] [--json results.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from doctor_suite_cases import GITHUB, HF, REPOSITORIES, WILD, Case  # noqa: E402
from doctor_suite_planted import PLANTED, Planted  # noqa: E402
from torchwise.doctor import Status, check, doctor_batch, seed_all  # noqa: E402
from torchwise.doctor.outputs import primary_output  # noqa: E402
from torchwise.losses import choose_loss  # noqa: E402
from torchwise.target import resolve_target  # noqa: E402

CASES = HF + GITHUB
ALL = CASES + WILD
Built = tuple[nn.Module, tuple[Any, ...], dict[str, Any], dict[str, Any]]


# -- building a case as the CLI does ------------------------------------------------


def extract(mirror: Path, workdir: Path) -> dict[str, Path]:
    """Each GitHub case's repository files, at the recorded commit, in a directory."""
    dirs = {}
    for case in GITHUB + WILD:
        assert case.repo is not None
        target = workdir / case.repo.replace("/", "+")
        dirs[case.name] = target
        if target.exists():
            continue
        target.mkdir(parents=True)
        git_dir = mirror / case.repo.replace("/", "+") / "repo"
        commit = REPOSITORIES[case.repo]
        archive = subprocess.run(
            ["git", f"--git-dir={git_dir}", "archive", commit, *case.paths],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return dirs


@contextlib.contextmanager
def inside(directory: Path | None) -> Iterator[None]:
    """Module targets (``models.vqvae:VQVAE``) import from the working directory."""
    if directory is None:
        yield
        return
    cwd = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(cwd)


def inputs_from(case: Case) -> str | None:
    return case.inputs_from.format(suite=BENCH) if case.inputs_from else None


def build(case: Case, dirs: dict[str, Path], seed: int = 0, config: dict[str, Any] | None = None,
          ) -> Built:  # fmt: skip
    """The model and batch ``torchwise doctor`` would run, and its doctor options."""
    init = None if case.init_kwargs is None else {**case.init_kwargs, **(config or {})}
    no_batch = case.options.get("batch_dim") == "none"
    with inside(dirs.get(case.name)):
        seed_all(seed)
        rt = resolve_target(
            case.target, inputs=case.inputs, init_kwargs=None if init is None else json.dumps(init),
            build=case.build, inputs_from=inputs_from(case),
            batch_dim=None if no_batch else case.options.get("batch_dim"),
        )  # fmt: skip
        args, kwargs = doctor_batch(rt, inputs_given=bool(case.inputs), seed=seed)
    options = {k: v for k, v in case.options.items() if k in ("causal_dim", "loss")}
    options["batch_dim"] = None if no_batch else rt.batch_dim
    options["seed"] = seed
    return rt.model, args, kwargs, options


def built_planted(bug: Planted, dirs: dict[str, Path]) -> Built:
    case = next(c for c in ALL if c.name == bug.base)
    model, args, kwargs, options = build(case, dirs, config=bug.config)
    if bug.plant is not None:
        bug.plant(model)
    return model, args, kwargs, options


# -- one run through the Python API ----------------------------------------------------


def flagged(report: Any) -> list[str]:
    return [
        f"{r.id} {r.status.value}: {r.summary[:140]}"
        for r in report
        if r.status in (Status.FAIL, Status.WARN)
    ]


def api_run(names: set[str] | None, dirs: dict[str, Path]) -> dict[str, Any]:
    healthy: dict[str, Any] = {}
    for case in CASES:
        if names and case.name not in names:
            continue
        model, args, kwargs, options = build(case, dirs)
        start = time.perf_counter()
        with inside(dirs.get(case.name)):
            report = check(model, args, kwargs=kwargs, name=case.name, **options)
        healthy[case.name] = {
            "seconds": time.perf_counter() - start,
            "verdicts": {r.id: r.status.value for r in report},
            "flagged": flagged(report),
        }
        print(f"  {case.name}: {len(healthy[case.name]['flagged'])} flagged, "
              f"{healthy[case.name]['seconds']:.1f}s", file=sys.stderr, flush=True)  # fmt: skip
        for line in healthy[case.name]["flagged"]:
            print(f"    {line}", file=sys.stderr, flush=True)
    wild: dict[str, Any] = {}
    for case in WILD:
        if names and case.name not in names:
            continue
        model, args, kwargs, options = build(case, dirs)
        with inside(dirs.get(case.name)):
            report = check(model, args, kwargs=kwargs, name=case.name, **options)
        wild[case.name] = {"verdicts": {r.id: r.status.value for r in report},
                           "flagged": flagged(report)}  # fmt: skip
    planted: dict[str, Any] = {}
    for bug in PLANTED:
        if names and bug.name not in names and bug.base not in names:
            continue
        model, args, kwargs, options = built_planted(bug, dirs)
        start = time.perf_counter()
        base = next(c for c in ALL if c.name == bug.base)
        with inside(dirs.get(base.name)):
            result = check(model, args, [bug.check], kwargs=kwargs, name=bug.name, **options)
        planted[bug.name] = {
            "seconds": time.perf_counter() - start,
            "status": result[bug.check].status.value,
            "summary": result[bug.check].summary[:200],
        }
        print(f"  {bug.name}: {planted[bug.name]['status']}", file=sys.stderr, flush=True)
    return {"healthy": healthy, "planted": planted, "wild": wild}


# -- the CLI, torchtest, inspect and doc -------------------------------------------------


def cli_verdicts(case: Case, dirs: dict[str, Path]) -> dict[str, str] | str:
    words = [a.replace("{suite}", str(BENCH)) for a in case.cli_args()]
    proc = subprocess.run(
        [sys.executable, "-m", "torchwise", "doctor", *words, "--format", "json"],
        capture_output=True, text=True, cwd=dirs.get(case.name), check=False,
    )  # fmt: skip
    if proc.returncode not in (0, 1):
        return f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    return {c["id"]: c["status"] for c in json.loads(proc.stdout)["checks"]}


def internal_error(command: str, case: Case, dirs: dict[str, Path]) -> str:
    words = [a.replace("{suite}", str(BENCH)) for a in case.cli_args()]
    words = [w for i, w in enumerate(words) if not _doctor_only(words, i)]
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "torchwise", command, *words],
        capture_output=True, text=True, cwd=dirs.get(case.name), check=False, timeout=900,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if "internal error" in proc.stderr:
        return f"INTERNAL ERROR ({seconds:.0f}s)"
    if proc.returncode == 2:
        return f"exit 2: {proc.stderr.strip().splitlines()[-1][:100]}"
    return f"ok ({seconds:.0f}s)"


def _doctor_only(words: list[str], i: int) -> bool:
    """``--causal N`` / ``--loss X`` / ``--target-spec X`` are doctor's options only."""
    doctor = ("--causal", "--loss", "--target-spec")
    return words[i] in doctor or (i > 0 and words[i - 1] in doctor)


class _CallWith(nn.Module):
    """torchtest calls ``model(inputs)`` with one tensor: this calls the model with its
    real arguments and returns its primary output."""

    def __init__(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        super().__init__()
        self.model, self.args, self.kwargs = model, args, kwargs

    def forward(self, _: torch.Tensor) -> torch.Tensor:
        return primary_output(self.model(*self.args, **self.kwargs))


def torchtest_verdict(built: Built) -> str:
    """torchtest's full suite with the loss doctor would pick and Adam at 1e-3."""
    import torchtest

    model, args, kwargs, _ = built
    wrapped = _CallWith(model, args, kwargs)
    with torch.no_grad():
        loss = choose_loss(wrapped(torch.zeros(1)))
    optim = torch.optim.Adam(wrapped.parameters(), lr=1e-3)
    try:
        torchtest.test_suite(
            wrapped, loss.fn, optim, [torch.zeros(1), loss.target],
            test_vars_change=True, test_nan_vals=True, test_inf_vals=True,
        )  # fmt: skip
    except (
        torchtest.VariablesChangeException,
        torchtest.NaNTensorException,
        torchtest.InfTensorException,
    ) as exc:
        return f"caught ({type(exc).__name__.replace('Exception', '')})"
    except Exception as exc:  # a crash is a verdict here, not a bench failure
        return f"crash ({type(exc).__name__})"
    return "pass"


# -- the report ------------------------------------------------------------------------


def speed(repeats: int = 3) -> dict[str, Any]:
    """doctor's default suite and torchtest's on ResNet-50 (reported, never judged)."""
    times, peer = [], []
    for _ in range(repeats):
        seed_all(0)
        rt = resolve_target("zoo:resnet50")
        args, kwargs = doctor_batch(rt, inputs_given=False)
        start = time.perf_counter()
        report = check(rt.model, args, kwargs=kwargs)
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        torchtest_verdict((rt.model, args, kwargs, {}))
        peer.append(time.perf_counter() - start)
    load = os.getloadavg()[0]
    result = {
        "inputs": report.inputs, "doctor_seconds": [round(t, 1) for t in times],
        "doctor_median": round(statistics.median(times), 1),
        "torchtest_median": round(statistics.median(peer), 2),
        "ratio": round(statistics.median(times) / statistics.median(peer), 1),
        "flagged": flagged(report), "load_average": round(load, 1),
        "slowest": sorted(((r.id, round(r.seconds, 1)) for r in report), key=lambda x: -x[1])[:4],
    }  # fmt: skip
    print("\n## Speed: ResNet-50\n\n" + json.dumps(result, indent=1))
    return result


def report(runs: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    first = runs[0]
    names = list(first["healthy"])
    identical = all(
        r["healthy"] == _verdicts_only(first["healthy"], r) and r.get("wild") == first.get("wild")
        for r in runs
    )
    same_planted = all(
        {k: v["status"] for k, v in r["planted"].items()}
        == {k: v["status"] for k, v in first["planted"].items()}
        for r in runs
    )
    print("\n## Healthy models: the whole doctor suite\n")
    print("| model | family | doctor flags (run 1) | median s | torchtest | CLI = API | "
          "inspect | doc |")  # fmt: skip
    print("|---|---|---|---:|---|---|---|---|")
    for name in names:
        case = next(c for c in CASES if c.name == name)
        flags = "; ".join(first["healthy"][name]["flagged"]) or "-"
        seconds = statistics.median(r["healthy"][name]["seconds"] for r in runs)
        e = extra.get(name, {})
        print(f"| {name} | {case.family} | {flags} | {seconds:.1f} | {e.get('torchtest', '-')} | "
              f"{e.get('cli', '-')} | {e.get('inspect', '-')} | {e.get('doc', '-')} |")  # fmt: skip
    if first.get("wild"):
        print("\n## Found in the wild: real problems in public repositories\n")
        print("| model | repository | doctor flags | what the code does |")
        print("|---|---|---|---|")
        for case in WILD:
            if case.name in first["wild"]:
                flags = "; ".join(f.split(":")[0] for f in first["wild"][case.name]["flagged"])
                print(f"| {case.name} | {case.repo} | {flags or '-'} | {case.finding} |")
    print("\n## Planted bugs: the check meant for each\n")
    print("| bug | model | what | check | doctor | torchtest |")
    print("|---|---|---|---|---|---|")
    for bug in PLANTED:
        if bug.name not in first["planted"]:
            continue
        status = first["planted"][bug.name]["status"]
        tt = extra.get(bug.name, {}).get("torchtest", "-")
        print(f"| {bug.name} | {bug.base} | {bug.bug} | {bug.check} | {status} | {tt} |")
    alarms = [sum(bool(r["healthy"][n]["flagged"]) for n in names) for r in runs]
    caught = [sum(v["status"] in ("fail", "warn") for v in r["planted"].values()) for r in runs]
    summary = {
        "runs": len(runs),
        "healthy": len(names),
        "false_alarms_per_run": alarms,
        "planted": len(first["planted"]),
        "caught_per_run": caught,
        "identical_verdicts_across_runs": identical and same_planted,
        "median_seconds_per_model": statistics.median(
            statistics.median(r["healthy"][n]["seconds"] for r in runs) for n in names
        ) if names else None,
    }  # fmt: skip
    tt_healthy = [extra[n]["torchtest"] for n in names if "torchtest" in extra.get(n, {})]
    tt_planted = [
        extra[b]["torchtest"] for b in first["planted"] if "torchtest" in extra.get(b, {})
    ]
    if tt_healthy or tt_planted:
        summary["torchtest_false_alarms"] = sum(v != "pass" for v in tt_healthy)
        summary["torchtest_caught"] = sum(v.startswith("caught") for v in tt_planted)
    cli = [extra[n]["cli"] for n in names if "cli" in extra.get(n, {})]
    if cli:
        summary["cli_matches_api"] = sum(v == "same" for v in cli)
    for command in ("inspect", "doc"):
        done = [extra[n][command] for n in names if command in extra.get(n, {})]
        if done:
            summary[f"{command}_internal_errors"] = sum("INTERNAL" in v for v in done)
    print("\n" + json.dumps(summary, indent=2))
    return summary


def _verdicts_only(reference: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """``run``'s healthy results with the first run's timings, to compare verdicts only."""
    return {
        name: {**result, "seconds": reference[name]["seconds"]}
        for name, result in run["healthy"].items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--cli", action="store_true")
    parser.add_argument("--torchtest", action="store_true")
    parser.add_argument("--inspect", action="store_true")
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--only", help="comma-separated case or planted-bug names")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    names = set(args.only.split(",")) if args.only else None
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        dirs = extract(args.mirror, workdir)
        if args.worker is not None:
            args.worker.write_text(json.dumps(api_run(names, dirs)))
            return
        if args.speed and args.runs == 0:
            speed()
            return
        runs = []
        for k in range(args.runs):
            out = Path(tmp) / f"run{k}.json"
            print(f"run {k + 1} of {args.runs}", file=sys.stderr, flush=True)
            command = [sys.executable, __file__, "--worker", str(out), "--workdir", str(workdir)]
            command += ["--mirror", str(args.mirror)]
            command += ["--only", args.only] if args.only else []
            subprocess.run(command, check=True)
            runs.append(json.loads(out.read_text()))
        extra: dict[str, dict[str, str]] = {}
        for case in CASES:
            if names and case.name not in names:
                continue
            row = extra.setdefault(case.name, {})
            if args.cli:
                cli = cli_verdicts(case, dirs)
                api = runs[0]["healthy"][case.name]["verdicts"]
                row["cli"] = "same" if cli == api else f"differs: {cli}"
            if args.torchtest:
                row["torchtest"] = torchtest_verdict(build(case, dirs))
            if args.inspect:
                row["inspect"] = internal_error("inspect", case, dirs)
                row["doc"] = internal_error("doc", case, dirs)
            print(f"  {case.name}: {row}", file=sys.stderr, flush=True)
        if args.torchtest:
            for bug in PLANTED:
                if names and bug.name not in names and bug.base not in names:
                    continue
                extra.setdefault(bug.name, {})["torchtest"] = torchtest_verdict(
                    built_planted(bug, dirs)
                )
        summary = report(runs, extra)
        if args.speed:
            summary["speed"] = speed()
        if args.json is not None:
            args.json.write_text(json.dumps({"summary": summary, "runs": runs, "extra": extra},
                                            indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
