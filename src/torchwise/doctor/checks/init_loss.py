"""init-loss: for a classifier, the loss at initialisation is near chance (Karpathy's
"verify loss @ init"): ``ln C`` for cross-entropy over C classes, ``ln 2`` for BCE.

The judged number is the *expected* loss over uniformly random labels, computed
from the logits, so it carries no label noise; it is at least ``ln C`` and equals
it only for constant logits (Jensen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import primary_output
from torchwise.doctor.report import Status

WARN_RATIO = 1.5
FAIL_RATIO = 3.0
#: the model's own loss may differ this much (either way) from cross-entropy of its logits
OWN_LOSS_RATIO = 1.5


@dataclass
class InitLossM:
    chance: float
    expected: float
    actual: float
    looks_like_probs: bool
    logit_std: float
    head: str | None
    own_loss: str | None = None  # the forward parameter that made the model compute its loss


class InitLoss(Check[InitLossM]):
    cost = "1 fwd"

    def measure(self, run: Run) -> InitLossM | Verdict:
        ctx = run.ctx
        chance = ctx.loss.chance_loss
        if chance is None:
            return Verdict.not_applicable(
                f"applies to classification losses (cross-entropy, BCE); the loss is "
                f"{ctx.loss.name}"
            )
        with torch.no_grad():
            out = ctx.forward(train=True)  # the mode training starts in
            z = primary_output(out)
            actual = float(ctx.loss_of(out))
        if ctx.loss.kind == "ce":
            # (N, C) logits with the class dim last, whatever the output layout
            z2 = z.movedim(ctx.loss.class_dim, -1).reshape(-1, z.shape[ctx.loss.class_dim]).float()
            expected = float((torch.logsumexp(z2, -1) - z2.mean(-1)).mean())
            probs = bool((z2 >= 0).all() and (z2 <= 1).all())
        else:
            zf = z.float()
            expected = float((F.softplus(zf) - zf / 2).mean())  # E over 0/1 labels of BCE
            probs = bool((zf >= 0).all() and (zf <= 1).all())
        head = None
        for name, module in ctx.model.named_modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)):
                head = name
        std = float(z.float().std()) if z.numel() > 1 else 0.0
        return InitLossM(chance, expected, actual, probs, std, head, ctx.labels_arg)

    def judge(self, m: InitLossM) -> Verdict:
        ratio = m.expected / m.chance
        evidence = {
            "chance_loss": m.chance,
            "expected_loss_random_labels": m.expected,
            "loss_with_labels": m.actual,
            "ratio_to_chance": ratio,
            "logit_std": m.logit_std,
        }
        where = [m.head] if m.head else []
        if not math.isfinite(m.expected):
            return Verdict(
                Status.FAIL,
                "the loss at initialization is not finite",
                evidence=evidence,
                where=where,
                causes=["NaN/inf in forward (see nan-inf)"],
                fix="fix the non-finite value first",
            )
        if m.looks_like_probs:
            return Verdict(
                Status.WARN,
                "the output is already in [0, 1] but the loss expects raw logits",
                evidence=evidence,
                where=where,
                causes=[
                    "softmax/sigmoid applied in forward and again inside "
                    "cross_entropy / binary_cross_entropy_with_logits",
                ],
                fix="return logits from forward and let the loss apply (log-)softmax/sigmoid",
            )
        thresholds = f"warns above {WARN_RATIO:g}x, fails above {FAIL_RATIO:g}x"
        own_ratio = m.actual / m.expected if m.expected > 0 else 1.0
        if m.own_loss and not 1 / OWN_LOSS_RATIO <= own_ratio <= OWN_LOSS_RATIO:
            evidence["own_loss_to_expected"] = own_ratio
            return Verdict(
                Status.WARN,
                f"the model's own loss ({m.actual:.3g} with {m.own_loss}=random labels) is "
                f"{own_ratio:.2f}x the cross-entropy of its logits ({m.expected:.3g}); warns "
                f"outside 1/{OWN_LOSS_RATIO:g}..{OWN_LOSS_RATIO:g}x",
                evidence=evidence,
                where=where,
                causes=[
                    "the loss in forward applies softmax/log_softmax to the logits again, or "
                    "compares them with the labels over the wrong dim",
                    "labels are shifted or reshaped differently from the logits",
                ],
                fix=f"compute the loss as F.cross_entropy(logits.view(-1, C), "
                f"{m.own_loss}.view(-1)) on raw logits",
            )
        if ratio <= WARN_RATIO:
            return Verdict(
                Status.PASS,
                f"expected loss at init {m.expected:.3g} is {ratio:.2f}x the chance loss "
                f"{m.chance:.3g} ({thresholds})",
                evidence=evidence,
            )
        return Verdict(
            Status.FAIL if ratio > FAIL_RATIO else Status.WARN,
            f"expected loss at init {m.expected:.3g} is {ratio:.1f}x the chance loss "
            f"{m.chance:.3g}: the initial predictions are confidently wrong ({thresholds})",
            evidence=evidence,
            where=where,
            causes=[
                "weights initialized too large (a custom init with std 1 instead of "
                "~1/sqrt(fan_in))",
                "an output layer with a large bias, or logits scaled up (temperature < 1)",
            ],
            fix="use the default (Kaiming-uniform) init or std ~ 1/sqrt(fan_in); zero or shrink "
            "the last layer's weights and bias so initial logits are near 0",
        )
