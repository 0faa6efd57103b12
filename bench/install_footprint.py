"""What a newcomer's first install costs: time and disk, without torch.

Measures, from this checkout:

1. ``pip install .`` (no extras) into a fresh virtual environment: seconds and the
   environment's size, then checks that ``review``, ``rules`` and ``ckpt scan`` work and
   that a model command says it needs torch;
2. the pre-commit hook's first run (``pre-commit try-repo . torchwise-review``) with an
   empty ``PRE_COMMIT_HOME``: seconds and the size of the environment pre-commit built.

Both include pip's resolution and download (from the configured index); repeat the run
to see the spread. Needs ``pre-commit`` (the ``bench`` extra).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def size_mb(path: Path) -> float:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return total / 2**20


def timed(command: list[str], **kwargs: object) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - start, result


def base_install(work: Path) -> None:
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip_size = size_mb(venv)
    seconds, result = timed([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)])
    if result.returncode != 0:
        raise SystemExit(f"pip install failed:\n{result.stderr}")
    print(f"pip install . (no extras): {seconds:.1f} s, environment {size_mb(venv):.0f} MB "
          f"({size_mb(venv) - pip_size:.0f} MB beyond an empty venv)")  # fmt: skip
    (work / "train.py").write_text("import torch\nstate = torch.load('model.pt')\n")
    (work / "state.pkl").write_bytes(b"\x80\x02}q\x00.")
    tw = str(venv / "bin" / "torchwise")
    checks = {
        "review finds TW301": ([tw, "review", "train.py", "--no-cache"], 1),
        "rules TW101": ([tw, "rules", "TW101"], 0),
        "ckpt scan": ([tw, "ckpt", "scan", "state.pkl"], 0),
        "inspect says it needs torch": ([tw, "inspect", "zoo:resnet18"], 2),
    }
    for label, (command, expected) in checks.items():
        result = subprocess.run(command, capture_output=True, text=True, cwd=work, check=False)
        verdict = "ok" if result.returncode == expected else f"UNEXPECTED exit {result.returncode}"
        first = (result.stderr or result.stdout).strip().splitlines()[:1]
        print(f"  {label}: {verdict} {first[0] if first else ''}")


def precommit_first_run(work: Path) -> None:
    precommit = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    if not Path(precommit).exists():
        print("pre-commit is not installed (pip install pre-commit): skipped")
        return
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    repo = work / "user-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_text("import torch\nstate = torch.load('model.pt')\n")
    # The hook as a user configures it, pinned to this checkout's HEAD (committed state).
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {ROOT}\n    rev: {rev}\n    hooks:\n      - id: torchwise-review\n"
    )
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    home = work / "pre-commit-home"
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    command = [precommit, "run", "--files", "train.py"]
    seconds, result = timed(command, cwd=repo, env=env)
    found = "TW301" in result.stdout
    print(f"pre-commit first run (builds the hook environment): {seconds:.1f} s, "
          f"hook environment {size_mb(home):.0f} MB, finding reported: {found}")  # fmt: skip
    seconds, result = timed(command, cwd=repo, env=env)
    print(f"pre-commit second run: {seconds:.1f} s")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base_install(Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        precommit_first_run(Path(tmp))


if __name__ == "__main__":
    main()
