"""Doctor on a named model: what every front end (the CLI, the MCP server) runs.

:func:`prepare_diagnosis` builds the model a :class:`~torchwise.target.TargetRequest`
names with doctor's seed, sizes its batch (:func:`~torchwise.doctor.doctor_batch`),
draws the labels, and checks every option against the inputs before any check
runs, so an error is one line and the front end has shown nothing yet. The
:class:`Diagnosis` it returns says what will run; :meth:`Diagnosis.run` runs it in
one call, reporting each check as it finishes. One call matters: checks named
one at a time each warn when they cannot run, where the full set skips them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchwise.doctor.api import DoctorInterrupted, check, select
from torchwise.doctor.batch import doctor_batch
from torchwise.doctor.context import reseed_all
from torchwise.doctor.options import DEFAULT_OVERFIT_STEPS, Options
from torchwise.doctor.preflight import validate_options
from torchwise.doctor.registry import CHECK_IDS
from torchwise.doctor.report import CheckResult, Report
from torchwise.losses import check_loss

if TYPE_CHECKING:
    from torchwise.target import ResolvedTarget, TargetRequest


@dataclass
class Diagnosis:
    """A model built and a batch drawn, ready for :meth:`run`."""

    resolved: ResolvedTarget
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: Options
    #: the check ids asked for; None runs every check that applies
    checks: list[str] | None

    @property
    def total(self) -> int:
        """How many results :meth:`run` will report."""
        return len(self.checks) if self.checks is not None else len(CHECK_IDS)

    def run(self, on_result: Callable[[CheckResult], None] | None = None) -> Report:
        """The report (a partial one, marked interrupted, after Ctrl-C)."""
        try:
            return check(
                self.resolved.model,
                self.args,
                self.checks,
                kwargs=self.kwargs,
                options=self.options,
                name=self.resolved.name,
                on_result=on_result,
            )
        except DoctorInterrupted as stop:
            return stop.report


def prepare_diagnosis(
    request: TargetRequest,
    checks: Sequence[str] | None = None,
    *,
    device: str = "cpu",
    seed: int = 0,
    loss: str = "auto",
    labels: str | None = None,
    causal_dim: int | None = None,
    overfit_steps: int = DEFAULT_OVERFIT_STEPS,
    overfit_lr: float | None = None,
) -> Diagnosis:
    """Build ``request``'s model and doctor's batch, and check the options against them.

    ``seed`` seeds everything random (the model's initial weights too); ``labels`` is
    an input spec for the loss's target (default: doctor draws its own).
    """
    from torchwise.target import make_inputs, parse_input_spec

    selected = select(checks) if checks else None
    spec = parse_input_spec(labels) if labels else None
    check_loss(loss)
    reseed_all(seed)  # the model's initial weights come from the seed too
    resolved = request.resolve(device=device)
    args, kwargs = doctor_batch(
        resolved, inputs_given=bool(request.inputs), device=device, seed=seed
    )
    target = None
    if spec is not None:
        (target,), _ = make_inputs([spec], device=device, seed=seed + 1)
    options = Options(
        loss=loss,
        target=target,
        causal_dim=causal_dim,
        batch_dim=None if request.no_batch else resolved.batch_dim,
        overfit_steps=overfit_steps,
        overfit_lr=overfit_lr,
        seed=seed,
    )
    validate_options(options, args, kwargs)
    return Diagnosis(resolved, args, kwargs, options, selected)
