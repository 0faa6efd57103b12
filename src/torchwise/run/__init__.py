"""``torchwise run``: run a training script for a few steps and report what it really does.

The user's script runs unmodified, as ``python SCRIPT.py ARGS`` would, with
monitors patched into torch (``run/monitors/``): optimizer steps and the
gradients they use, every backward, module calls and their modes, DataLoader
passes, the losses' inputs, and, on request, a simulated GPU (``as_cuda``) or
several ranks (``nproc``). It stops after a few optimizer steps per training
pass and a few batches per evaluation pass, and reports findings (codes
``TWR###``, documented in :mod:`torchwise.run.catalog`) at the user's
``file:line``.

Public API (nothing here imports torch until a run starts)::

    from torchwise.run import RunOptions, run_script

    report = run_script("train.py", ["--lr", "0.1"], options=RunOptions(steps=5))
    for finding in report.findings:
        print(finding.location, finding.code, finding.message)
"""

from __future__ import annotations

from torchwise.run.api import check_target, run_script, simulates_gpu_by_default
from torchwise.run.catalog import Check, all_checks, explain, get_check
from torchwise.run.options import RunOptions
from torchwise.run.report import RunReport

__all__ = [
    "Check",
    "RunOptions",
    "RunReport",
    "all_checks",
    "check_target",
    "explain",
    "get_check",
    "run_script",
    "simulates_gpu_by_default",
]
