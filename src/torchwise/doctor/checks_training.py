"""Training checks: init-loss and overfit-batch (Karpathy's "verify loss @ init" and
"overfit one batch")."""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

from torchwise.doctor.context import Context, backward, primary_output
from torchwise.doctor.registry import register, result
from torchwise.doctor.report import CheckResult, Status


def _logits_2d(ctx: Context, z: torch.Tensor) -> torch.Tensor:
    """(N, C) logits with the class dim last, whatever the output layout."""
    return z.movedim(ctx.loss.class_dim, -1).reshape(-1, z.shape[ctx.loss.class_dim]).float()


@register("init-loss", title="loss at initialization is near chance", cost="1 fwd")
def init_loss(ctx: Context) -> CheckResult:
    chance = ctx.loss.chance_loss
    if chance is None:
        return result(
            "init-loss",
            Status.SKIP,
            f"applies to classification losses (cross-entropy, BCE); the loss is {ctx.loss.name}",
        )
    with torch.no_grad():
        out = ctx.forward(train=True)  # the mode training starts in
        z = primary_output(out)
        actual = float(ctx.loss_of(out))
    if ctx.loss.kind == "ce":
        z2 = _logits_2d(ctx, z)  # (N, C)
        # expected cross-entropy against uniformly random labels: free of label noise,
        # and >= ln(C) with equality only for constant logits (Jensen)
        expected = float((torch.logsumexp(z2, -1) - z2.mean(-1)).mean())
        looks_like_probs = bool((z2 >= 0).all() and (z2 <= 1).all())
    else:
        zf = z.float()
        expected = float((F.softplus(zf) - zf / 2).mean())  # E over 0/1 labels of BCE
        looks_like_probs = bool((zf >= 0).all() and (zf <= 1).all())
    evidence: dict[str, Any] = {
        "chance_loss": chance,
        "expected_loss_random_labels": expected,
        "loss_with_labels": actual,
        "ratio_to_chance": expected / chance,
        "logit_std": float(z.float().std()) if z.numel() > 1 else 0.0,
    }
    head = _last_linear(ctx)
    if not math.isfinite(expected):
        return result(
            "init-loss",
            Status.FAIL,
            "the loss at initialization is not finite",
            evidence=evidence,
            where=[head] if head else [],
            causes=["NaN/inf in forward (see nan-inf)"],
            fix="fix the non-finite value first",
        )
    if looks_like_probs:
        return result(
            "init-loss",
            Status.WARN,
            "the output is already in [0, 1] but the loss expects raw logits",
            evidence=evidence,
            where=[head] if head else [],
            causes=[
                "softmax/sigmoid applied in forward and again inside "
                "cross_entropy / binary_cross_entropy_with_logits",
            ],
            fix="return logits from forward and let the loss apply (log-)softmax/sigmoid",
        )
    ratio = expected / chance
    if ratio <= 1.5:
        return result(
            "init-loss",
            Status.PASS,
            f"loss at init {expected:.3g} is near chance {chance:.3g} (ratio {ratio:.2f})",
            evidence=evidence,
        )
    return result(
        "init-loss",
        Status.FAIL if ratio > 3 else Status.WARN,
        f"loss at init {expected:.3g} is {ratio:.1f}x the chance loss {chance:.3g}: the "
        "initial predictions are confidently wrong",
        evidence=evidence,
        where=[head] if head else [],
        causes=[
            "weights initialized too large (a custom init with std 1 instead of ~1/sqrt(fan_in))",
            "an output layer with a large bias, or logits scaled up (temperature < 1)",
        ],
        fix="use the default (Kaiming-uniform) init or std ~ 1/sqrt(fan_in); zero or shrink "
        "the last layer's weights and bias so initial logits are near 0",
    )


def _last_linear(ctx: Context) -> str | None:
    last = None
    for name, module in ctx.model.named_modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)):
            last = name
    return last


@register("overfit-batch", title="the model can memorize one small batch", cost="N steps")
def overfit_batch(ctx: Context) -> CheckResult:
    steps, lr, budget = (
        ctx.options.overfit_steps,
        ctx.options.overfit_lr,
        ctx.options.overfit_budget_s,
    )
    params = [p for _, p in ctx.trainable()]
    if lr is None:
        lr = 1e-2 if sum(p.numel() for p in params) < 2_000_000 else 1e-3
    if not params:
        return result("overfit-batch", Status.SKIP, "the model has no trainable parameters")
    chance = ctx.loss.chance_loss

    def goal(initial: float) -> float:
        # 10% of the start, and of chance for classifiers: from a broken init at 80x
        # chance, falling to 8x chance is not "memorized"
        return 0.1 * (min(initial, chance) if chance else initial)

    opt = torch.optim.Adam(params, lr=lr)
    args, kwargs = ctx.fresh_inputs()
    ctx.model.train()
    losses: list[float] = []
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.enable_grad():
            loss = ctx.loss_of(ctx.model(*args, **kwargs))
        value = float(loss.detach())
        losses.append(value)
        if not math.isfinite(value):
            break
        if value <= goal(losses[0]) or not loss.requires_grad:
            break
        backward(loss)
        opt.step()
        if time.perf_counter() - start > budget:
            break
    initial, best = losses[0], min(losses)
    out_of_time = len(losses) < steps and best > goal(initial) and math.isfinite(losses[-1])
    evidence: dict[str, Any] = {
        "initial_loss": initial,
        "best_loss": best,
        "steps": len(losses),
        "budget_steps": steps,
        "optimizer": f"Adam(lr={lr})",
        "seconds": round(time.perf_counter() - start, 2),
        "curve": [round(v, 4) for v in losses[:: max(1, len(losses) // 8)]],
    }
    if not math.isfinite(losses[-1]):
        status, summary = Status.FAIL, f"the loss became non-finite at step {len(losses) - 1}"
    elif initial <= 0 or best <= goal(initial):
        return result(
            "overfit-batch",
            Status.PASS,
            f"loss fell from {initial:.3g} to {best:.3g} in {len(losses)} steps",
            evidence=evidence,
        )
    elif out_of_time:
        return result(
            "overfit-batch",
            Status.WARN,
            f"the {budget:g}s budget ran out after {len(losses)} steps (loss {initial:.3g} -> "
            f"{best:.3g}); raise --overfit-budget to judge",
            evidence=evidence,
            fix="rerun with a larger --overfit-budget (or a smaller batch)",
        )
    elif best <= 0.5 * initial:
        status = Status.WARN
        summary = (
            f"loss fell from {initial:.3g} to {best:.3g} in {steps} steps but not to 10% of it; "
            "raise --overfit-steps to tell slow from stuck"
        )
    else:
        status = Status.FAIL
        summary = f"cannot overfit one batch: loss {initial:.3g} -> {best:.3g} in {steps} steps"
    return result(
        "overfit-batch",
        status,
        summary,
        evidence=evidence,
        causes=[
            "the output is squashed (softmax/sigmoid/ReLU on the logits) so the loss has a floor",
            "gradients do not reach most weights (see grad-flow, param-update)",
            "a learning rate far too low or too high for this model",
            "a capacity bottleneck (a 1-unit layer, everything routed through a detached path)",
        ],
        fix="return raw logits, make sure every layer trains, then tune the learning rate "
        "(--overfit-lr) before anything else",
    )
