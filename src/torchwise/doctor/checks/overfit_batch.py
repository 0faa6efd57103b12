"""overfit-batch: Adam can drive the loss on one batch down to a tenth (Karpathy's
"overfit one batch").

Regularisation is switched off, as the recipe says: every module runs in eval
mode (dropout, drop-path and recurrent dropout off) except BatchNorm, which keeps
using batch statistics as in training. With dropout 0.5 a healthy LSTM language
model cannot memorise 140 tokens in 200 steps; without it, it does in about 60.

Targets the model can reach. With no labels given, a regression or dense
output (MSE) is trained towards the output of a re-initialised copy of the model
on the same batch, never towards random noise: a small fully convolutional net
(a super-resolution or style-transfer network) cannot memorise per-pixel noise,
but any architecture can represent what it computes itself with other weights,
so a miss says the optimisation is broken, not the target impossible. Those
targets are made up, so the goal there is half the starting loss, not a tenth.

FAIL means stuck: the loss diverged, or it stopped moving (the last quarter of
the budget improved it by less than 1% of the start) far above the goal, which is
what a squashed output or a cut gradient path causes. A loss still falling when
the budget ends only warns: a healthy recurrent net can be slow, not stuck.

The budget is a number of steps (``--overfit-steps``), never seconds, so the
verdict is the same on an idle and a loaded machine; the loop stops as soon as
the goal is reached, so a healthy model rarely spends it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import Context, backward, primary_output
from torchwise.doctor.report import Status

#: the goal: the loss at 10% of where it started (and of chance, for classifiers)
GOAL_FRACTION = 0.1
#: the goal towards a re-initialised copy's output: halving. Those targets are made
#: up, so the bar is "the loss clearly moves", not "memorised" (a style-transfer net
#: with instance norm halves it in ~50 steps and is at a third after 200)
TWIN_GOAL_FRACTION = 0.5
#: below the goal's miss, still falling this far counts as "slow", not "stuck"
SLOW_FRACTION = 0.5
#: Adam's default learning rate by size: small nets need 1e-2 to memorise in a few
#: dozen steps, transformers above a few million parameters diverge at 1e-2
SMALL_MODEL = 2_000_000
#: "stopped moving": the last quarter of the budget improved the best loss by less
#: than this fraction of the starting loss
PLATEAU_FRACTION = 0.01
#: below this many steps the curve is too short to tell stuck from slow
PLATEAU_MIN_STEPS = 8


LABELS = "the labels"
TWIN = "the output of a re-initialised copy of the model"


@dataclass
class OverfitM:
    losses: list[float]
    goal: float
    budget: int
    lr: float
    #: where the targets came from, for the report
    target: str


class OverfitBatch(Check[OverfitM]):
    cost = "up to --overfit-steps fwd+bwd+Adam steps; stops at the goal"

    def measure(self, run: Run) -> OverfitM | Verdict:
        ctx = run.ctx
        params = [p for _, p in ctx.trainable()]
        if not params:
            return Verdict.not_applicable("the model has no trainable parameters")
        lr = ctx.options.overfit_lr
        if lr is None:
            lr = 1e-2 if sum(p.numel() for p in params) < SMALL_MODEL else 1e-3
        chance = ctx.loss.chance_loss
        opt = torch.optim.Adam(params, lr=lr)
        args, kwargs = ctx.fresh_inputs()
        reachable = _reachable_target(ctx)
        target = LABELS if reachable is None else TWIN
        losses: list[float] = []
        goal = math.inf
        for _ in range(ctx.options.overfit_steps):
            opt.zero_grad(set_to_none=True)
            ctx.quiet_train_mode()  # every step from the same modes, caches dropped
            with torch.enable_grad():
                out = ctx.model(*args, **kwargs)
                if reachable is None:
                    loss = ctx.loss_of(out)
                else:
                    loss = ctx.loss.fn(primary_output(out), reachable)
            losses.append(float(loss.detach()))
            if len(losses) == 1:
                # from a broken init at 80x chance, falling to 8x chance is not "memorised"
                start = min(losses[0], chance) if chance else losses[0]
                goal = (GOAL_FRACTION if reachable is None else TWIN_GOAL_FRACTION) * start
            if not math.isfinite(losses[-1]) or losses[-1] <= goal or not loss.requires_grad:
                break
            backward(loss)
            opt.step()
        return OverfitM(losses, goal, ctx.options.overfit_steps, lr, target)

    def judge(self, m: OverfitM) -> Verdict:
        initial, best, steps = m.losses[0], min(m.losses), len(m.losses)
        evidence = {
            "initial_loss": initial,
            "best_loss": best,
            "goal": m.goal,
            "steps": steps,
            "budget_steps": m.budget,
            "optimizer": f"Adam(lr={m.lr:g})",
            "target": m.target,
            "curve": [round(v, 4) for v in m.losses[:: max(1, steps // 8)]],
        }
        if not math.isfinite(m.losses[-1]):
            return self._stuck(
                Status.FAIL, f"the loss became non-finite at step {steps - 1}", evidence
            )
        if initial <= 0 or best <= m.goal:
            bar = (
                "10% of the start, and of chance for classifiers"
                if m.target == LABELS
                else "half the start, on the output of a re-initialised copy of the model"
            )
            return Verdict(
                Status.PASS,
                f"loss fell from {initial:.3g} to {best:.3g} in {steps} of {m.budget} steps, "
                f"reaching the goal {m.goal:.3g} ({bar})",
                evidence=evidence,
            )
        moving = _still_falling(m.losses, m.budget)
        if moving or best <= SLOW_FRACTION * initial:
            how = "and was still falling" if moving else "then stopped moving"
            return Verdict(
                Status.WARN,
                f"loss fell from {initial:.3g} to {best:.3g} in {steps} steps {how}, short of "
                f"the goal {m.goal:.3g}; raise --overfit-steps to tell slow from stuck "
                f"(fails only when it stops moving before halving)",
                evidence=evidence,
                causes=[
                    "a learning rate too low for this model (--overfit-lr)",
                    "a model that learns slowly (recurrent nets need more steps)",
                ],
                fix="rerun with more --overfit-steps or another --overfit-lr before suspecting "
                "a bug",
            )
        return self._stuck(
            Status.FAIL,
            f"cannot overfit one batch: loss {initial:.3g} -> {best:.3g} in {steps} steps, "
            f"then stopped moving (goal {m.goal:.3g}; fails when the loss stalls before halving)",
            evidence,
        )

    def _stuck(self, status: Status, summary: str, evidence: dict[str, object]) -> Verdict:
        return Verdict(
            status,
            summary,
            evidence=evidence,
            causes=[
                "the output is squashed (softmax/sigmoid/ReLU on the logits) so the loss has a "
                "floor",
                "gradients do not reach most weights (see grad-flow, param-update)",
                "a learning rate far too low or too high for this model",
                "a capacity bottleneck (a 1-unit layer, everything routed through a detached path)",
            ],
            fix="return raw logits, make sure every layer trains, then tune the learning rate "
            "(--overfit-lr) before anything else",
        )


def _still_falling(losses: list[float], budget: int) -> bool:
    """Whether the loss was still going down when the budget ran out (slow, not stuck)."""
    if len(losses) < budget:
        return False  # stopped early: non-finite or at the goal
    if len(losses) < PLATEAU_MIN_STEPS:
        return True  # too short a curve to call it stuck
    tail = len(losses) - len(losses) // 4
    gained = min(losses[:tail]) - min(losses[tail:])
    return gained > PLATEAU_FRACTION * abs(losses[0])


def _reachable_target(ctx: Context) -> torch.Tensor | None:
    """For made-up regression targets: the output of a re-initialised copy of the model,
    which the architecture can represent by construction. None: keep the labels (given
    by the user, class indices, or a model's own loss), or no copy could be made."""
    if ctx.options.target is not None or ctx.labels_arg is not None or ctx.loss.kind != "mse":
        return None
    try:
        twin = copy.deepcopy(ctx.model)
    except Exception:  # an unpicklable attribute: fall back to the made-up labels
        return None
    torch.manual_seed(ctx.options.seed + 1)
    reset = False
    for module in twin.modules():
        reset_parameters = getattr(module, "reset_parameters", None)
        if callable(reset_parameters):
            reset_parameters()
            reset = True
    if not reset:
        return None
    twin.eval()
    for module in twin.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.train()
    args, kwargs = ctx.fresh_inputs()
    with torch.no_grad():
        out = primary_output(twin(*args, **kwargs)).detach()
    if out.shape != ctx.loss.target.shape or not bool(torch.isfinite(out).all()):
        return None
    return out
