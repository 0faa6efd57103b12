"""Helpers of the run tests, which execute small scripts in this process.

They use ``torchwise.run.child.execute``.

A subprocess costs an interpreter and an import of torch (seconds on a loaded
runner), so the checks are exercised in-process, where a run of a tiny script
takes a fraction of a second; the CLI and the distributed runs are the few
subprocess tests. Torch runs single-threaded, as in doctor's tests.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import torch

from torchwise.run.child import execute
from torchwise.run.options import RunOptions, Target

torch.set_num_threads(1)

Findings = list[dict[str, Any]]


def run_source(
    directory: Path, source: str, name: str = "script.py", **options: Any
) -> dict[str, Any]:
    """Write ``source`` to ``directory/name`` and run it there, in this process; the result."""
    path = directory / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    before = os.getcwd()
    os.chdir(directory)  # the script's files land next to it, as `cd dir && python name` would
    try:
        return execute(Target(str(path), None, ()), RunOptions(**options))
    finally:
        os.chdir(before)


def codes(result: dict[str, Any], *, serious: bool = False) -> list[str]:
    """The codes found (``serious``: warnings and errors only)."""
    return sorted(f["code"] for f in result["findings"] if not serious or f["severity"] != "info")
