"""Real PyTorch library sources for the review benchmarks, fetched from PyPI.

``pip download --no-deps`` fetches the wheel (nothing is installed or
imported); its ``.py`` files are unpacked into ``bench/.corpus/<name>/``
(git-ignored). A corpus already there is reused.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

CORPUS = Path(__file__).parent / ".corpus"
LIBRARIES = ("timm", "lightning", "torchmetrics", "transformers")


def corpus(name: str) -> Path:
    """The directory of ``name``'s Python sources, downloading the wheel if needed."""
    target = CORPUS / name
    if target.is_dir() and any(target.rglob("*.py")):
        return target
    wheels = CORPUS / "_wheels"
    found = sorted(wheels.glob(f"{name}-*.whl"))
    if not found:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        subprocess.run([*pip, "-d", str(wheels), name], check=True)
        found = sorted(wheels.glob(f"{name}-*.whl"))
    with zipfile.ZipFile(found[-1]) as archive:
        for member in archive.namelist():
            if member.endswith(".py") and ".dist-info/" not in member:
                archive.extract(member, target)
    return target


def version(name: str) -> str:
    found = sorted((CORPUS / "_wheels").glob(f"{name}-*.whl"))
    return found[-1].name.split("-")[1] if found else "?"


def size(directory: Path) -> tuple[int, int]:
    """(files, lines) of the ``.py`` files under ``directory``."""
    files = sorted(directory.rglob("*.py"))
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    return len(files), lines
