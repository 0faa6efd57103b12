"""overfit-batch: Adam can drive the loss on one batch down to a tenth (Karpathy's
"overfit one batch").

Regularisation is switched off, as the recipe says: every module runs in eval
mode (dropout, drop-path and recurrent dropout off) except BatchNorm, which keeps
using batch statistics as in training. With dropout 0.5 a healthy LSTM language
model cannot memorise 140 tokens in 200 steps; without it, it does in about 60.

The budget is a number of steps (``--overfit-steps``), never seconds, so the
verdict is the same on an idle and a loaded machine; the loop stops as soon as
the goal is reached, so a healthy model rarely spends it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import backward
from torchwise.doctor.report import Status

#: the goal: the loss at 10% of where it started (and of chance, for classifiers)
GOAL_FRACTION = 0.1
#: below the goal's miss, still falling this far counts as "slow", not "stuck"
SLOW_FRACTION = 0.5
#: Adam's default learning rate by size: small nets need 1e-2 to memorise in a few
#: dozen steps, transformers above a few million parameters diverge at 1e-2
SMALL_MODEL = 2_000_000


@dataclass
class OverfitM:
    losses: list[float]
    goal: float
    budget: int
    lr: float


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
        ctx.model.eval()  # regularisation off ...
        for module in ctx.model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.train()  # ... but BatchNorm normalises with the batch, as in training
        losses: list[float] = []
        goal = math.inf
        for _ in range(ctx.options.overfit_steps):
            opt.zero_grad(set_to_none=True)
            with torch.enable_grad():
                loss = ctx.loss_of(ctx.model(*args, **kwargs))
            losses.append(float(loss.detach()))
            if len(losses) == 1:
                # from a broken init at 80x chance, falling to 8x chance is not "memorised"
                start = min(losses[0], chance) if chance else losses[0]
                goal = GOAL_FRACTION * start
            if not math.isfinite(losses[-1]) or losses[-1] <= goal or not loss.requires_grad:
                break
            backward(loss)
            opt.step()
        return OverfitM(losses, goal, ctx.options.overfit_steps, lr)

    def judge(self, m: OverfitM) -> Verdict:
        initial, best, steps = m.losses[0], min(m.losses), len(m.losses)
        evidence = {
            "initial_loss": initial,
            "best_loss": best,
            "goal": m.goal,
            "steps": steps,
            "budget_steps": m.budget,
            "optimizer": f"Adam(lr={m.lr:g})",
            "curve": [round(v, 4) for v in m.losses[:: max(1, steps // 8)]],
        }
        if not math.isfinite(m.losses[-1]):
            return self._stuck(
                Status.FAIL, f"the loss became non-finite at step {steps - 1}", evidence
            )
        if initial <= 0 or best <= m.goal:
            return Verdict(
                Status.PASS,
                f"loss fell from {initial:.3g} to {best:.3g} in {steps} of {m.budget} steps, "
                f"reaching the goal {m.goal:.3g} (10% of the start, and of chance for classifiers)",
                evidence=evidence,
            )
        if best <= SLOW_FRACTION * initial:
            return Verdict(
                Status.WARN,
                f"loss fell from {initial:.3g} to {best:.3g} in {m.budget} steps but not to the "
                f"goal {m.goal:.3g}; raise --overfit-steps to tell slow from stuck",
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
            f"cannot overfit one batch: loss {initial:.3g} -> {best:.3g} in {m.budget} steps "
            f"(goal {m.goal:.3g}; fails when it does not even halve)",
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
