"""``torchwise project`` on real repositories: what it finds, builds and measures, and how fast.

The repositories are public ones fetched into ``/work/.mirror`` (bare git
directories; never copied into this repository). Each is unpacked into a
temporary directory and audited twice: static (``--no-import``) and full
(models built in workers, inspected and doctored). Static runs print wall and
CPU seconds; full runs print wall seconds only (the workers are the
forkserver's children, so their CPU time never reaches this process).

    python bench/project_real.py                       # the default list
    python bench/project_real.py karpathy+nanoGPT --max-models 4
    python bench/project_real.py --judge               # facts judged against labels

``--judge`` runs the repositories of :data:`JUDGED` (none used before issue 26), each
static and with its models built (doctor off), and scores every fact the knowledge
states against ``bench/project_facts.csv``, written by reading each repository: a
fact labelled ``right`` or ``wrong`` counts as such; every fact labelled ``right`` or
``expected`` (one the knowledge should state) that a report does not state is
``missing``; a stated fact without a label is printed as ``unjudged`` (label it).
``--score DIR`` scores the JSON reports kept in DIR (``--out`` of an earlier run, or
``torchwise project --format json`` reports named ``NAME.json``) without running.
Facts: commands (purpose, directory, command), dependencies, the declared torch,
layout entries, top-level models, and each build the full run tried (built, or what
it says it needs).

Repositories whose files are missing from the mirror (large files kept out of
the snapshot) are unpacked file by file, skipping what is absent.
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIRROR = Path("/work/.mirror")
DEFAULT = [
    "pytorch+examples",
    "karpathy+nanoGPT",
    "karpathy+minGPT",
    "kuangliu+pytorch-cifar",
    "milesial+Pytorch-UNet",
    "facebookresearch+detr",
    "eriklindernoren+PyTorch-GAN",
    "ashleve+lightning-hydra-template",
    "tloen+alpaca-lora",
    "huggingface+pytorch-image-models",
]


#: Judged fact by fact (issue 26); commits in docs/benchmarks.md.
JUDGED = [
    "karpathy+makemore",
    "bentrevett+pytorch-seq2seq",
    "mateuszbuda+brain-segmentation-pytorch",
    "princeton-vl+RAFT",
    "Lightning-AI+deep-learning-project-template",
    "zalandoresearch+pytorch-vq-vae",
    "clovaai+CRAFT-pytorch",
    "chenyuntc+simple-faster-rcnn-pytorch",
    "hkproj+pytorch-transformer",
    "tkipf+pygcn",
    "rosinality+stylegan2-pytorch",
    "SeanNaren+deepspeech.pytorch",
]
#: Judged only once the code was final, with no change after (an out-of-sample check).
HELD_OUT = [
    "HobbitLong+SupContrast",
    "LeeJunHyun+Image_Segmentation",
    "xinntao+ESRGAN",
]
LABELS = Path(__file__).with_name("project_facts.csv")


def facts(report: dict) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    """Every fact a report states, as (kind, key) with the key the labels use."""
    k = report["knowledge"]
    found = [("torch", f"declared {k['torch']['declared']}")] if k["torch"]["declared"] else []
    found += [("dependency", p["name"]) for p in k["stack"]]
    found += [
        ("command", f"{c['purpose']} | {c.get('cwd', '.')} | {c['command']}") for c in k["commands"]
    ]
    for field in ("model_dirs", "checkpoint_dirs", "training_scripts", "config_dirs", "test_dirs"):
        found += [("layout", f"{field} | {value}") for value in k["layout"][field]]
    for m in k["modules"]:
        if m["top_level"]:
            found.append(("model", f"{m['path']}:{m['name']}"))
            plan = m["build"]
            if plan.get("status") == "built":
                found.append(("build", f"{m['path']}:{m['name']} | built"))
            elif plan.get("status") == "failed":
                found.append(("build", f"{m['path']}:{m['name']} | needs {plan['needs']}"))
    return found


def load_labels() -> dict[str, dict[tuple[str, str], tuple[str, str]]]:
    labels: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}
    if LABELS.exists():
        with LABELS.open(newline="") as handle:
            for row in csv.DictReader(handle):
                key = (row["kind"], row["fact"])
                labels.setdefault(row["repository"], {})[key] = (row["verdict"], row["note"])
    return labels


def judge(name: str, report: dict, labels: dict) -> dict[str, list[str]]:  # type: ignore[type-arg]
    """right / wrong / missing / unjudged facts of one repository's report."""
    mine = labels.get(name.replace("+", "/"), {})
    stated = facts(report)
    verdicts: dict[str, list[str]] = {"right": [], "wrong": [], "missing": [], "unjudged": []}
    for kind, key in stated:
        verdict = mine.get((kind, key), ("unjudged", ""))[0]
        verdict = "right" if verdict == "expected" else verdict
        verdicts.setdefault(verdict, []).append(f"{kind}: {key}")
    stated_keys = set(stated)
    built = any(kind == "build" for kind, _ in stated)
    for (kind, key), (verdict, _) in mine.items():
        # the truth: every fact labelled right or expected (builds only when some were tried)
        truth = verdict in ("right", "expected") and (built or kind != "build")
        if truth and (kind, key) not in stated_keys:
            verdicts["missing"].append(f"{kind}: {key}")
    return verdicts


def run_judged(args: argparse.Namespace) -> None:
    labels = load_labels()
    totals: dict[str, int] = {}
    print("| repository | commit | facts stated | right | wrong | missing | unjudged |")
    print("|---|---|---:|---:|---:|---:|---:|")
    details = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.repos or JUDGED:
            root = unpack(name, Path(tmp))
            commit = subprocess.run(
                ["git", f"--git-dir={git_dir(name)}", "rev-parse", "HEAD"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()[:10]  # fmt: skip
            extra = ["--max-models", args.max_models, "--model-timeout", args.model_timeout]
            report, _, _ = audit(root, "--doctor", "off", "--no-review", *extra)
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{root.name}.judged.json").write_text(json.dumps(report))
            verdicts = judge(name, report, labels)
            for kind, items in verdicts.items():
                totals[kind] = totals.get(kind, 0) + len(items)
            stated = len(verdicts["right"]) + len(verdicts["wrong"]) + len(verdicts["unjudged"])
            print(
                f"| {name.replace('+', '/')} | {commit} | {stated} | {len(verdicts['right'])} | "
                f"{len(verdicts['wrong'])} | {len(verdicts['missing'])} | "
                f"{len(verdicts['unjudged'])} |",
                flush=True,
            )
            details.append((name, verdicts))
    print(f"\ntotal: {totals}")
    for name, verdicts in details:
        for kind in ("wrong", "missing", "unjudged"):
            for item in verdicts[kind]:
                print(f"{kind:9} {name.replace('+', '/')}: {item}")


def score_kept(directory: Path, names: list[str]) -> None:
    labels = load_labels()
    totals: dict[str, int] = {}
    for name in names:
        short = name.split("+", 1)[1]
        found = [directory / f"{short}.judged.json", directory / f"{short}.json"]
        path = next(p for p in found if p.exists())
        verdicts = judge(name, json.loads(path.read_text()), labels)
        counts = {kind: len(items) for kind, items in verdicts.items()}
        print(name.replace("+", "/"), counts)
        for kind, count in counts.items():
            totals[kind] = totals.get(kind, 0) + count
    print(f"total: {totals}")


def git_dir(name: str) -> Path:
    base = MIRROR / name
    return next((p.parent for p in base.rglob("HEAD") if (p.parent / "objects").is_dir()), base)


def unpack(name: str, into: Path) -> Path:
    repo = git_dir(name)
    root = into / name.split("+", 1)[1]
    root.mkdir(parents=True)
    files = subprocess.run(
        ["git", f"--git-dir={repo}", "ls-tree", "-r", "--name-only", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    for relative in files:
        shown = subprocess.run(
            ["git", f"--git-dir={repo}", "show", f"HEAD:{relative}"],
            capture_output=True,
            check=False,
        )
        if shown.returncode == 0:
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(shown.stdout)
    return root


def audit(root: Path, *extra: str) -> tuple[dict[str, object], float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "torchwise", "project", str(root), "--format", "json", "-q", *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        raise RuntimeError(f"{root.name}: {result.stderr}")
    report: dict[str, object] = json.loads(result.stdout)
    return report, wall, cpu


def summary(name: str, static: dict, full: dict | None, times: list[float]) -> str:  # type: ignore[type-arg]
    k = static["knowledge"]
    modules = k["modules"]
    top = [m for m in modules if m["top_level"]]
    buildable = [m for m in top if m["build"]["how"] != "needs-arguments"]
    review = static["review"]["by_severity"]
    line = (
        f"| {name} | {k['python_files']} | {len(modules)} ({len(top)}) | {len(buildable)} | "
        f"{len(k['commands'])} | {review['error']}/{review['warning']} | "
        f"{times[0]:.1f} ({times[1]:.1f}) |"
    )
    if full is not None:
        models = full["models"]
        measured = sum(m["measure"] is not None for m in models)
        doctored = sum(m["doctor"] is not None for m in models)
        line += f" {len(models)}/{measured}/{doctored} | {times[2]:.0f} |"
    return line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repos", nargs="*")
    parser.add_argument("--max-models", default="4")
    parser.add_argument("--model-timeout", default="300")
    parser.add_argument("--static-only", action="store_true")
    parser.add_argument("--out", type=Path, help="keep the JSON reports here")
    parser.add_argument("--judge", action="store_true", help="score facts against the labels")
    parser.add_argument("--score", type=Path, help="score the reports kept in this directory")
    args = parser.parse_args()
    if args.score:
        score_kept(args.score, args.repos or JUDGED)
        return
    if args.judge:
        run_judged(args)
        return
    print(
        "| repository | .py files | modules (top-level) | buildable | commands "
        "| review errors/warnings | static s wall (CPU) | built/measured/doctored "
        "| full s wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.repos or DEFAULT:
            root = unpack(name, Path(tmp))
            static, wall_s, cpu_s = audit(root, "--no-import")
            full, times = None, [wall_s, cpu_s]
            if not args.static_only:
                full, wall_f, cpu_f = audit(
                    root, "--max-models", args.max_models, "--model-timeout", args.model_timeout
                )
                times += [wall_f, cpu_f]
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{root.name}.static.json").write_text(json.dumps(static))
                if full is not None:
                    (args.out / f"{root.name}.full.json").write_text(json.dumps(full))
            print(summary(name, static, full, times), flush=True)


if __name__ == "__main__":
    main()
