"""Differential testing against torch itself: does the payload run under torch.load?

Each case is a file built by the test whose only payload creates a marker file
in a temporary directory. :func:`torch_outcomes` loads every file with
``torch.load(path, weights_only=False)`` in a child process (never in the test
process, never in torchwise) and reports, per file, whether its marker appeared
and what torch.load returned or raised. The scanner's verdict is then checked
against that, not against anyone's reading of torch's source.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_CHILD = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
for path in sys.argv[1:]:
    try:
        value = torch.load(path, weights_only=False, map_location="cpu")
        outcome = "loaded " + type(value).__name__
    except BaseException as exc:  # the point is to see what torch does with each file
        text = str(exc).strip().splitlines()
        outcome = f"{type(exc).__name__}: {text[0][:160] if text else ''}"
    print(json.dumps([path, outcome]), flush=True)
"""


@dataclass
class Case:
    """A file to build: ``data`` holds the marker path where its payload would create it."""

    name: str
    data: bytes
    #: the loader the case targets; "torch.load" cases are loaded by the child process
    note: str = ""


@dataclass
class Outcome:
    ran: bool
    #: "loaded dict" or "RuntimeError: ..."
    torch: str


def marker_for(root: Path, name: str) -> Path:
    return root / "markers" / f"RAN_{name}"


def write_cases(root: Path, cases: list[Case]) -> dict[str, Path]:
    (root / "markers").mkdir(parents=True, exist_ok=True)
    paths = {}
    for case in cases:
        path = root / f"{case.name}.pt"
        path.write_bytes(case.data)
        paths[case.name] = path
    return paths


def torch_outcomes(root: Path, paths: dict[str, Path], timeout: float = 300) -> dict[str, Outcome]:
    """Load every file with torch.load(weights_only=False) in child processes.

    A file that kills its process (a crash in a C extension) is recorded as such and
    the rest are loaded in a fresh process.
    """
    order = list(paths)
    results: dict[str, str] = {}
    while len(results) < len(order):
        todo = [name for name in order if name not in results]
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, *(str(paths[n]) for n in todo)],
            capture_output=True,
            text=True,
            cwd=root / "markers",
            timeout=timeout,
        )
        by_path = {str(paths[n]): n for n in todo}
        for line in proc.stdout.splitlines():
            path, outcome = json.loads(line)
            results[by_path[path]] = outcome
        missing = [n for n in todo if n not in results]
        if missing and proc.returncode != 0:
            results[missing[0]] = f"the process died (exit {proc.returncode})"
    return {name: Outcome(marker_for(root, name).exists(), results[name]) for name in order}
