"""Dynamic health checks on a model and a batch: ``torchwise doctor`` as a library.

>>> from torchwise.doctor import assert_healthy, check
>>> report = check(model, torch.randn(8, 3, 32, 32), checks=["grad-flow", "nan-inf"])
>>> report["grad-flow"].status
<Status.PASS: 'pass'>
>>> assert_healthy(model, torch.randn(8, 3, 32, 32))  # raises DoctorError on a failure

The check ids (:data:`CHECK_IDS`) and the JSON layout are public contracts. The
names are loaded on first use, so ``torchwise.doctor.registry`` (the ids and
titles) imports without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchwise.doctor.api import DoctorError, DoctorInterrupted, assert_healthy, check
    from torchwise.doctor.options import Options
    from torchwise.doctor.registry import CHECK_IDS
    from torchwise.doctor.report import CheckResult, Report, Status

__all__ = [
    "CHECK_IDS",
    "CheckResult",
    "DoctorError",
    "DoctorInterrupted",
    "Options",
    "Report",
    "Status",
    "assert_healthy",
    "check",
]

_HOMES = {
    "CHECK_IDS": "registry",
    "CheckResult": "report",
    "DoctorError": "api",
    "DoctorInterrupted": "api",
    "Options": "options",
    "Report": "report",
    "Status": "report",
    "assert_healthy": "api",
    "check": "api",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'torchwise.doctor' has no attribute {name!r}")
    return getattr(importlib.import_module(f"torchwise.doctor.{home}"), name)
