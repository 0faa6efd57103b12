"""Dynamic health checks on a model and a batch: ``torchwise doctor`` as a library.

>>> from torchwise.doctor import assert_healthy, check
>>> report = check(model, torch.randn(8, 3, 32, 32), checks=["grad-flow", "nan-inf"])
>>> report["grad-flow"].status
<Status.PASS: 'pass'>
>>> assert_healthy(model, torch.randn(8, 3, 32, 32))  # raises DoctorError on a failure

The check ids (:data:`CHECK_IDS`) and the JSON layout are public contracts;
:data:`CHECKS` is the one table of ids, titles and what each check guards against
(the CLI's help and ``torchwise tests`` read it). The names are loaded on first
use, so ``torchwise.doctor.registry`` (the ids and titles) imports without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchwise.doctor.api import DoctorError, DoctorInterrupted, assert_healthy, check, select
    from torchwise.doctor.batch import (
        DOCTOR_SIZES,
        at_doctor_sizes,
        doctor_batch,
        doctor_inputs,
    )
    from torchwise.doctor.context import reseed_all as seed_all
    from torchwise.doctor.diagnose import Diagnosis, prepare_diagnosis
    from torchwise.doctor.options import Options
    from torchwise.doctor.preflight import validate_options
    from torchwise.doctor.registry import CHECK_IDS, CHECKS
    from torchwise.doctor.report import CheckResult, Report, Status

__all__ = [
    "CHECKS",
    "CHECK_IDS",
    "DOCTOR_SIZES",
    "CheckResult",
    "Diagnosis",
    "DoctorError",
    "DoctorInterrupted",
    "Options",
    "Report",
    "Status",
    "assert_healthy",
    "at_doctor_sizes",
    "check",
    "doctor_batch",
    "doctor_inputs",
    "prepare_diagnosis",
    "seed_all",
    "select",
    "validate_options",
]

_HOMES = {
    "CHECKS": "registry",
    "CHECK_IDS": "registry",
    "DOCTOR_SIZES": "batch",
    "at_doctor_sizes": "batch",
    "doctor_batch": "batch",
    "doctor_inputs": "batch",
    "seed_all": "context",
    "Diagnosis": "diagnose",
    "prepare_diagnosis": "diagnose",
    "CheckResult": "report",
    "DoctorError": "api",
    "DoctorInterrupted": "api",
    "Options": "options",
    "Report": "report",
    "Status": "report",
    "assert_healthy": "api",
    "check": "api",
    "select": "api",
    "validate_options": "preflight",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'torchwise.doctor' has no attribute {name!r}")
    attr = "reseed_all" if name == "seed_all" else name
    return getattr(importlib.import_module(f"torchwise.doctor.{home}"), attr)
