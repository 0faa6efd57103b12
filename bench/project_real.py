"""``torchwise project`` on real repositories: what it finds, builds and measures, and how fast.

The repositories are public ones fetched into ``/work/.mirror`` (bare git
directories; never copied into this repository). Each is unpacked into a
temporary directory and audited twice: static (``--no-import``) and full
(models built in workers, inspected and doctored). Static runs print wall and
CPU seconds; full runs print wall seconds only (the workers are the
forkserver's children, so their CPU time never reaches this process).

    python bench/project_real.py                       # the default list
    python bench/project_real.py karpathy+nanoGPT --max-models 4

Repositories whose files are missing from the mirror (large files kept out of
the snapshot) are unpacked file by file, skipping what is absent.
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("repos", nargs="*", default=DEFAULT)
    parser.add_argument("--max-models", default="4")
    parser.add_argument("--model-timeout", default="300")
    parser.add_argument("--static-only", action="store_true")
    parser.add_argument("--out", type=Path, help="keep the JSON reports here")
    args = parser.parse_args()
    print(
        "| repository | .py files | modules (top-level) | buildable | commands "
        "| review errors/warnings | static s wall (CPU) | built/measured/doctored "
        "| full s wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.repos:
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
