"""Does a knob keep the training step correct? One step with and without it, compared.

Both arms start from identical copies of the model and take the same step on the
same batch under the same seed. Three things must agree within the tolerance the
knob implies (:class:`~torchwise.tune.knobs.Tolerance`: rounding for fp32
reorderings, much more for bf16):

- the step's loss (the forward is right);
- the loss *after* the step, evaluated by one reference forward in fp32 on each
  arm's updated weights (the backward and the optimizer are right);
- the parameter update's first-order effect on the loss, ``<g, update>`` with
  the baseline's gradient ``g`` (the backward and the optimizer move the
  weights the same way where it matters; see :class:`Tolerance` for why not a
  plain cosine, which is reported as evidence).

A model whose training forward is random (dropout) is compared with both arms in
eval mode, where the same weights give the same loss; the check says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from torchwise.tune.knobs import Tolerance
from torchwise.tune.step import (
    Batch,
    TrainingStep,
    Workload,
    copy_model,
    map_tensors,
    primary_output,
)


@dataclass(frozen=True)
class CheckResult:
    """The evidence that a knob's step matches the baseline's (or how it does not)."""

    ok: bool
    mode: str
    loss_base: float
    loss_knob: float
    after_base: float
    after_knob: float
    update_cosine: float | None
    effect_base: float
    effect_knob: float
    tolerance: Tolerance
    problem: str | None = None

    def summary(self) -> str:
        cosine = "n/a" if self.update_cosine is None else f"{self.update_cosine:.4f}"
        text = (
            f"loss {self.loss_knob:.6g} vs {self.loss_base:.6g}, after one step "
            f"{self.after_knob:.6g} vs {self.after_base:.6g}, update effect "
            f"{self.effect_knob:.4g} vs {self.effect_base:.4g} (cosine {cosine}); tolerance "
            f"{self.tolerance.loss_rtol:g} on losses, {self.tolerance.update_rtol:g} on the "
            f"update ({self.tolerance.why}; {self.mode} mode)"
        )
        return text if self.problem is None else f"{self.problem}: {text}"


def to_device(batch: Batch, device: torch.device) -> Batch:
    args, kwargs, target = map_tensors(
        (batch.args, batch.kwargs, batch.target), lambda t: t.to(device)
    )
    return Batch(args, kwargs, target)


class Reference:
    """An fp32 eager copy of the model that evaluates the loss at any arm's weights."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.module = copy_model(workload.model).to(workload.device)
        self.batch = to_device(workload.batch, workload.device)

    def loss(self, weights: nn.Module, *, train: bool, seed: int) -> float:
        state = {**dict(weights.named_parameters()), **dict(weights.named_buffers())}
        self.module.train(train)
        with torch.no_grad():
            torch.manual_seed(seed)
            out = torch.func.functional_call(
                self.module, state, self.batch.args, self.batch.kwargs, strict=False
            )
            target = self.batch.target
            assert target is not None
            return float(self.workload.loss_fn(primary_output(out).float(), target))

    def is_stochastic(self, *, seed: int = 0) -> bool:
        """Whether two training-mode forwards with different seeds disagree (dropout)."""
        first = self.loss(self.module, train=True, seed=seed)
        second = self.loss(self.module, train=True, seed=seed + 1)
        return first != second


def _snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().float().clone() for n, p in module.named_parameters()}


def _update(module: nn.Module, before: dict[str, torch.Tensor]) -> torch.Tensor:
    parts = [(p.detach().float() - before[n]).flatten() for n, p in module.named_parameters()]
    return torch.cat(parts).double() if parts else torch.zeros(1, dtype=torch.float64)


def _gradient(module: nn.Module) -> torch.Tensor:
    parts = [
        (p.grad.detach().float() if p.grad is not None else torch.zeros_like(p.float())).flatten()
        for p in module.parameters()
    ]
    return torch.cat(parts).double() if parts else torch.zeros(1, dtype=torch.float64)


def _relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-6)


def check_knob(
    reference: Reference,
    base: TrainingStep,
    knob: TrainingStep,
    tolerance: Tolerance,
    *,
    train: bool,
    seed: int = 0,
    steps: int = 1,
) -> CheckResult:
    """Take ``steps`` steps with each arm from identical weights and compare (module doc).

    Both arms must be fresh (no step taken yet). ``steps`` is more than 1 only for
    CUDA graphs, whose first call runs warm-up steps before capturing.
    """
    batch = reference.workload.batch
    losses: dict[str, float] = {}
    updates: dict[str, torch.Tensor] = {}
    gradient = torch.zeros(1, dtype=torch.float64)
    for name, arm in (("base", base), ("knob", knob)):
        arm.module.train(train)
        before = _snapshot(arm.module)
        with arm.scope():
            torch.manual_seed(seed)
            loss = arm.step_on(batch)
            for _ in range(steps - 1):
                loss = arm.step_on(batch)
        losses[name] = float(loss)
        updates[name] = _update(arm.module, before)
        if name == "base":
            gradient = _gradient(arm.module)
        arm.module.train(True)
    with base.scope():  # the reference's numerics do not depend on the thread count
        after_base = reference.loss(base.module, train=train, seed=seed)
        after_knob = reference.loss(knob.module, train=train, seed=seed)
    norms = updates["base"].norm() * updates["knob"].norm()
    cosine = float(updates["base"] @ updates["knob"] / norms) if float(norms) > 0 else None
    effect_base = float(gradient @ updates["base"]) if gradient.numel() > 1 else 0.0
    effect_knob = float(gradient @ updates["knob"]) if gradient.numel() > 1 else 0.0

    problem = None
    values = (losses["base"], losses["knob"], after_base, after_knob)
    if not all(math.isfinite(v) for v in values):
        problem = "non-finite loss"
    elif _relative(losses["knob"], losses["base"]) > tolerance.loss_rtol:
        problem = "the step's loss differs"
    elif _relative(after_knob, after_base) > tolerance.loss_rtol:
        problem = "the loss after one step differs"
    elif cosine is None and float(updates["base"].norm()) > 0:
        if knob.scaler is None:
            problem = "the step did not update the parameters"
        # else: GradScaler skipped the first step (inf gradients at its initial
        # scale); skipping until the scale fits is how it works, not a bug.
    elif _relative(effect_knob, effect_base) > tolerance.update_rtol:
        problem = "the parameter update differs"
    mode = "train" if train else "eval"
    return CheckResult(
        problem is None, mode, *values, cosine, effect_base, effect_knob, tolerance, problem
    )
