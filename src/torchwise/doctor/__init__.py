"""Dynamic health checks on a model and a batch: ``torchwise doctor`` as a library.

>>> from torchwise.doctor import assert_healthy, check
>>> report = check(model, torch.randn(8, 3, 32, 32), checks=["grad-flow", "nan-inf"])
>>> report["grad-flow"].status
<Status.PASS: 'pass'>
>>> assert_healthy(model, torch.randn(8, 3, 32, 32))  # raises DoctorError on a failure

The check ids (:data:`CHECK_IDS`) and the JSON layout are public contracts.
"""

from __future__ import annotations

from torchwise.doctor.api import DoctorError, assert_healthy, check
from torchwise.doctor.registry import CHECK_IDS, checks
from torchwise.doctor.report import CheckResult, Report, Status

__all__ = [
    "CHECK_IDS",
    "CheckResult",
    "DoctorError",
    "Report",
    "Status",
    "assert_healthy",
    "check",
    "checks",
]
