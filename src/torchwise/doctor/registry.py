"""The one registry of checks, keyed by their public ids.

A check is a function ``(Context) -> CheckResult`` registered with
:func:`register`; the ids are a public contract (``--checks``, JSON output, the
Python API) and their order here is the order reports list them in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchwise.doctor.report import CheckResult, Status

if TYPE_CHECKING:
    from torchwise.doctor.context import Context

#: The public check ids, in report order.
CHECK_IDS: tuple[str, ...] = (
    "grad-flow",
    "batch-independence",
    "causal-leak",
    "eval-determinism",
    "train-eval-gap",
    "init-loss",
    "overfit-batch",
    "param-update",
    "nan-inf",
    "grad-scale",
    "dead-units",
    "determinism",
    "amp-drift",
    "device-consistency",
    "exportable",
)

# Modules that define checks; imported on first use of the registry.
_CHECK_MODULES = (
    "torchwise.doctor.checks_grad",
    "torchwise.doctor.checks_dependence",
    "torchwise.doctor.checks_modes",
    "torchwise.doctor.checks_training",
    "torchwise.doctor.checks_numerics",
    "torchwise.doctor.checks_portability",
)

CheckFn = Callable[["Context"], CheckResult]


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    cost: str
    fn: CheckFn


_REGISTRY: dict[str, CheckSpec] = {}


def register(check_id: str, *, title: str, cost: str) -> Callable[[CheckFn], CheckFn]:
    """Register a check under a public id from :data:`CHECK_IDS`."""
    if check_id not in CHECK_IDS:
        raise ValueError(f"{check_id!r} is not a public check id")

    def decorate(fn: CheckFn) -> CheckFn:
        _REGISTRY[check_id] = CheckSpec(check_id, title, cost, fn)
        return fn

    return decorate


def checks() -> dict[str, CheckSpec]:
    """All registered checks in report order."""
    for module in _CHECK_MODULES:
        importlib.import_module(module)
    return {cid: _REGISTRY[cid] for cid in CHECK_IDS if cid in _REGISTRY}


def result(check_id: str, status: Status | str, summary: str, **details: Any) -> CheckResult:
    """Shorthand the checks use to build their result."""
    return CheckResult(check_id, Status(status), summary, **details)
