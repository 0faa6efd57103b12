"""``check()`` and ``assert_healthy()``: run the registered checks on a model and a batch.

Each check runs between a snapshot and a restore of the model and of torch's
global state, so checks cannot see each other's side effects and the caller gets
their model back exactly as it was.
"""

from __future__ import annotations

import time
import traceback
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from torchwise.doctor.context import Context, Options, normalize_inputs, tensors_in
from torchwise.doctor.registry import CHECK_IDS
from torchwise.doctor.registry import checks as registered
from torchwise.doctor.report import CheckResult, Report, Status
from torchwise.doctor.state import Snapshot
from torchwise.errors import TorchwiseError

_DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "bool",
    torch.uint8: "u8",
}


def describe(t: torch.Tensor) -> str:
    """``f32[8,3,32,32]``: the input-spec spelling of a tensor."""
    return f"{_DTYPES.get(t.dtype, str(t.dtype))}[{','.join(str(s) for s in t.shape)}]"


def select(check_ids: Iterable[str] | None) -> list[str]:
    """Validate ``checks=[...]`` / ``--checks`` ids; None means all, in report order."""
    if check_ids is None:
        return list(CHECK_IDS)
    wanted = [c.strip() for c in check_ids if c.strip()]
    unknown = [c for c in wanted if c not in CHECK_IDS]
    if unknown:
        raise TorchwiseError(
            f"unknown check id(s): {', '.join(unknown)}",
            hint="valid ids: " + ", ".join(CHECK_IDS),
        )
    return [c for c in CHECK_IDS if c in wanted]


def check(
    model: nn.Module,
    inputs: Any,
    checks: Iterable[str] | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    loss: str = "auto",
    target: torch.Tensor | None = None,
    causal_dim: int | None = None,
    overfit_steps: int = 60,
    overfit_lr: float | None = None,
    overfit_budget_s: float = 30.0,
    export_budget_s: float = 60.0,
    seed: int = 0,
    name: str | None = None,
) -> Report:
    """Run health checks on ``model`` with one batch ``inputs`` and return a :class:`Report`.

    ``inputs`` is a tensor, a tuple of positional args or a dict of keyword args;
    ``kwargs`` adds keyword args to positional ones (``model(*inputs, **kwargs)``).
    ``checks`` is a list of check ids (default: all). The model, its modes,
    gradients, ``requires_grad`` flags, hooks and torch/numpy/python RNG states are
    exactly as before when this returns.
    """
    ids = select(checks)
    if overfit_steps < 1 or export_budget_s <= 0:
        raise TorchwiseError("overfit_steps and export_budget_s must be positive")
    args, kw = normalize_inputs(inputs)
    kwargs = {**kw, **(kwargs or {})}
    options = Options(
        loss=loss,
        target=target,
        causal_dim=causal_dim,
        overfit_steps=overfit_steps,
        overfit_lr=overfit_lr,
        overfit_budget_s=overfit_budget_s,
        export_budget_s=export_budget_s,
        seed=seed,
    )
    specs = registered()
    start = time.perf_counter()
    outer = Snapshot(model)
    results: list[CheckResult] = []
    seen_warnings: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ctx = Context(model, args, kwargs, options)
            for check_id in ids:
                snap = Snapshot(model)
                t0 = time.perf_counter()
                try:
                    res = specs[check_id].fn(ctx)
                except TorchwiseError:
                    raise
                except Exception as exc:
                    res = _crashed(check_id, exc)
                finally:
                    snap.restore()
                res.seconds = time.perf_counter() - t0
                results.append(res)
        for w in caught:
            text = f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}"
            if text not in seen_warnings and len(seen_warnings) < 5:
                seen_warnings.append(text)
    finally:
        outer.restore()
    return Report(
        target=name or type(model).__name__,
        inputs=[describe(t) for t in tensors_in((args, kwargs))],
        loss=ctx.loss.describe(),
        results=results,
        seconds=time.perf_counter() - start,
        notes=[f"the model warned: {w}" for w in seen_warnings],
    )


def _crashed(check_id: str, exc: Exception) -> CheckResult:
    frames = traceback.extract_tb(exc.__traceback__)
    frame = frames[-1] if frames else None
    at = f"{frame.filename}:{frame.lineno}" if frame else "?"
    return CheckResult(
        check_id,
        Status.FAIL,
        f"the model raised {type(exc).__name__} during this check: {str(exc)[:200]}",
        evidence={"raised_at": at},
        causes=["forward fails in the mode or under the transformation this check uses"],
        fix="run the check's scenario by hand (see docs/doctor.md) and fix the exception",
    )


class DoctorError(AssertionError):
    """Raised by :func:`assert_healthy`; ``.report`` holds the full :class:`Report`."""

    def __init__(self, report: Report, flagged: list[CheckResult]) -> None:
        self.report = report
        ids = ", ".join(f"{r.id} ({r.status.value})" for r in flagged)
        lines = [f"{type(self).__name__}: {report.target} is not healthy: {ids}"]
        for r in flagged:
            lines.append(f"- {r.id}: {r.summary}")
            if r.where:
                lines.append(f"    where: {', '.join(r.where[:6])}")
            if r.fix:
                lines.append(f"    fix:   {r.fix}")
        super().__init__("\n".join(lines))


def assert_healthy(
    model: nn.Module,
    inputs: Any,
    checks: Iterable[str] | None = None,
    *,
    allow_warnings: bool = True,
    **options: Any,
) -> Report:
    """Run :func:`check` and raise :class:`DoctorError` if any check fails.

    With ``allow_warnings=False`` a warning fails too. Returns the report otherwise.
    """
    report = check(model, inputs, checks, **options)
    flagged = report.failed if allow_warnings else report.failed + report.warned
    if flagged:
        raise DoctorError(report, flagged)
    return report
