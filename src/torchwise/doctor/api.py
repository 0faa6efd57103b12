"""``check()`` and ``assert_healthy()``: run the registered checks on a model and a batch.

Each check runs between a snapshot and a restore of the model and of torch's
global state, so checks cannot see each other's side effects and the caller gets
their model back exactly as it was. Results are handed to ``on_result`` as each
check finishes; Ctrl-C stops the run and raises :class:`DoctorInterrupted`
carrying the checks that finished.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from torchwise.doctor import registry
from torchwise.doctor.checks.base import Run, Verdict, Why
from torchwise.doctor.context import Context, normalize_inputs
from torchwise.doctor.facts import Facts
from torchwise.doctor.options import Options, options_from
from torchwise.doctor.preflight import validate_options
from torchwise.doctor.report import CheckResult, Report, Status
from torchwise.doctor.state import Snapshot
from torchwise.doctor.trace import module_in_traceback
from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.inputs import spec_dtype
from torchwise.tensortree import tensors_in


def describe(t: torch.Tensor) -> str:
    """``f32[8,3,32,32]``: the input-spec spelling of a tensor."""
    return f"{spec_dtype(t.dtype)}[{','.join(str(s) for s in t.shape)}]"


def select(check_ids: Iterable[str] | None) -> list[str]:
    """Validate ``checks=[...]`` / ``--checks`` ids; None means all, in report order."""
    if check_ids is None:
        return list(registry.CHECK_IDS)
    wanted = [c.strip() for c in check_ids if c.strip()]
    unknown = [c for c in wanted if c not in registry.CHECK_IDS]
    if unknown:
        raise TorchwiseError(
            f"unknown check id(s): {', '.join(unknown)}",
            hint="valid ids: " + ", ".join(registry.CHECK_IDS),
        )
    return [c for c in registry.CHECK_IDS if c in wanted]


class DoctorInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`check`; ``.report`` holds the checks that finished."""

    def __init__(self, report: Report) -> None:
        super().__init__(f"interrupted after {len(report.results)} checks")
        self.report = report


def check(
    model: nn.Module,
    inputs: Any,
    checks: Iterable[str] | None = None,
    *,
    options: Options | None = None,
    kwargs: dict[str, Any] | None = None,
    name: str | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    **overrides: Any,
) -> Report:
    """Run health checks on ``model`` with one batch ``inputs`` and return a :class:`Report`.

    ``inputs`` is a tensor, a tuple of positional args or a dict of keyword args;
    ``kwargs`` adds keyword args to positional ones (``model(*inputs, **kwargs)``).
    ``checks`` is a list of check ids (default: all); a check named there that
    cannot run reports a warning saying why, instead of a silent skip. Options
    come as one :class:`Options` and/or as its field names (``causal_dim=1``).
    ``on_result`` gets each result as soon as its check finishes. The model, its
    modes, gradients, ``requires_grad`` flags, hooks and torch/numpy/python RNG
    states are exactly as before when this returns or raises.
    """
    opts = options_from(options, overrides)
    ids = select(checks)
    requested = set(ids) if checks is not None else set()
    if opts.causal_dim is not None:
        requested.add("causal-leak")
    args, kw = normalize_inputs(inputs)
    kw = {**kw, **(kwargs or {})}
    validate_options(opts, args, kw)  # a bad option costs nothing and is no verdict
    label = name or type(model).__name__
    start = time.perf_counter()
    results: list[CheckResult] = []
    ctx: Context | None = None
    outer = Snapshot(model)
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught_now:
            warnings.simplefilter("always")
            caught = caught_now
            ctx = Context(model, args, kw, opts, name=label)
            run = Run(ctx, Facts(ctx))
            for check_id in ids:
                result = _run_one(check_id, run, model, requested)
                results.append(result)
                if on_result is not None:
                    on_result(result)
    except KeyboardInterrupt:
        report = _report(label, args, kw, ctx, results, start, caught, total=len(ids))
        raise DoctorInterrupted(report) from None
    finally:
        outer.restore()
    return _report(label, args, kw, ctx, results, start, caught, total=len(ids))


def _run_one(check_id: str, run: Run, model: nn.Module, requested: set[str]) -> CheckResult:
    snap = Snapshot(model)
    t0 = time.perf_counter()
    try:
        verdict = registry.load(check_id).verdict(run)
    except TorchwiseError:
        raise
    except Exception as exc:
        verdict = _crashed(run.ctx, check_id, exc)
    finally:
        snap.restore()
    if verdict.why_not is Why.CANNOT_RUN and check_id in requested:
        verdict = Verdict(
            Status.WARN,
            f"requested, but it cannot run: {verdict.summary}",
            evidence=verdict.evidence,
            fix="give inputs this check can use (see docs/doctor.md), or drop it from --checks",
        )
    return CheckResult(
        check_id,
        verdict.status,
        verdict.summary,
        evidence=verdict.evidence,
        where=verdict.where,
        causes=verdict.causes,
        fix=verdict.fix,
        seconds=time.perf_counter() - t0,
    )


def _crashed(ctx: Context, check_id: str, exc: Exception) -> Verdict:
    module = module_in_traceback(exc, ctx.model)
    error = UserCodeError.from_exception(
        exc, doing=f"forward of {ctx.name}", where=ctx.describe_module(module)
    )
    evidence: dict[str, Any] = {}
    if error.location:
        evidence["raised_at"] = error.location
    return Verdict(
        Status.FAIL,
        f"during this check, {error.message}",
        evidence=evidence,
        where=[module] if module else [],
        causes=[
            "forward fails in the mode or under the transformation this check uses (train "
            "mode, autocast, the meta device, torch.export; see docs/doctor.md)"
        ],
        fix="run that scenario by hand and fix the exception"
        + (f" at {error.location}" if error.location else ""),
    )


def _report(
    label: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    ctx: Context | None,
    results: list[CheckResult],
    start: float,
    caught: list[warnings.WarningMessage],
    *,
    total: int,
) -> Report:
    seen: list[str] = []
    for w in caught:
        text = f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}"
        if text not in seen and len(seen) < 5:
            seen.append(text)
    notes = list(ctx.notes) if ctx is not None else []
    if ctx is not None and ctx.batch_dim:
        notes.append(f"batch dim {ctx.batch_dim}")
    elif ctx is not None and ctx.batch_dim is None:
        notes.append("no batch dim: the inputs are one example (batch_dim=None)")
    return Report(
        target=label,
        inputs=[describe(t) for t in tensors_in((args, kwargs))],
        loss=ctx.describe_loss() if ctx is not None else "(not chosen)",
        results=results,
        seconds=time.perf_counter() - start,
        notes=notes + [f"the model warned: {w}" for w in seen],
        planned=total,
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
