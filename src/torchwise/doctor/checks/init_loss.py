"""init-loss: for a classifier, the loss at initialisation is near chance (Karpathy's
"verify loss @ init"): ``ln C`` for cross-entropy over C classes, ``ln 2`` for BCE.

The judged number is the *expected* loss over uniformly random labels, computed
from the logits, so it carries no label noise; it is at least ``ln C`` and equals
it only for constant logits (Jensen).

When the model computes its own loss, that loss is read by what it does, not by its
value: a softmax loss over the class dim (cross-entropy, CTC, label smoothing) does
not change when every logit of one position moves by the same amount, so its
gradient with respect to the logits sums to zero over the class dim. A loss whose
gradient sums to zero over another dim (the batch, time) normalises over that dim
instead: the wrong axis, a failure. Its scale is evidence only: a loss summed over
positions (CTC's default ``reduction="sum"``) is larger than a mean by design.
A ``(B, B)`` similarity matrix (contrastive logits) has no chance level to compare
with: its loss at init depends on the temperature, so the check does not apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import primary_output
from torchwise.doctor.report import Status

WARN_RATIO = 1.5
FAIL_RATIO = 3.0
#: a dim the own loss normalises over: its gradient sums to zero there, up to rounding
#: (the squared norm of the sum is this small a fraction of its largest possible value)
INVARIANT = 1e-6


@dataclass
class InitLossM:
    chance: float
    expected: float
    actual: float
    looks_like_probs: bool
    logit_std: float
    head: str | None
    own_loss: str | None = None  # the forward parameter that made the model compute its loss
    class_dim: int = -1
    #: per output dim, how far the own loss's gradient is from summing to zero there
    #: (0: the loss normalises over that dim); empty when not measured
    sum_ratios: dict[int, float] = field(default_factory=dict)


class InitLoss(Check[InitLossM]):
    cost = "1 fwd"

    def measure(self, run: Run) -> InitLossM | Verdict:
        ctx = run.ctx
        chance = ctx.loss.chance_loss
        if ctx.pairwise or ctx.loss.pairwise:
            return Verdict.not_applicable(
                f"the output {list(ctx.output_shape)} compares the batch's samples with each "
                "other (contrastive logits): its loss at init depends on the temperature (a "
                "logit scale), not on a number of classes"
            )
        if chance is None:
            return Verdict.not_applicable(
                f"applies to classification losses (cross-entropy, BCE); the loss is "
                f"{ctx.loss.name}"
            )
        ctx.reseed()
        with torch.enable_grad():
            out = ctx.forward(train=True)  # the mode training starts in
            z = primary_output(out)
            loss = ctx.loss_of(out)
            ratios = _sum_ratios(loss, z) if ctx.labels_arg else {}
        actual = float(loss.detach())
        z = z.detach()
        class_dim = ctx.loss.class_dim % z.ndim if z.ndim else 0
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
        return InitLossM(
            chance, expected, actual, probs, std, head, ctx.labels_arg, class_dim, ratios
        )

    @staticmethod
    def _wrong_axis(m: InitLossM, evidence: dict[str, object]) -> Verdict | None:
        """A FAIL when the own loss normalises over a dim other than the class dim."""
        if not m.sum_ratios:
            return None
        normalised = sorted(d for d, r in m.sum_ratios.items() if r < INVARIANT)
        evidence["own_loss_normalises_over_dims"] = normalised
        if not normalised or m.class_dim in normalised:
            return None
        dims = ", ".join(str(d) for d in normalised)
        return Verdict(
            Status.FAIL,
            f"the model's own loss normalises its logits over dim {dims}, not over the class "
            f"dim {m.class_dim}: its gradient sums to zero along dim {dims} (fails when a "
            "softmax loss is taken over any dim but the classes)",
            evidence=evidence,
            where=[m.head] if m.head else [],
            causes=[
                "log_softmax/softmax/cross_entropy over the wrong dim (dim=0 or dim=1 of "
                "(B, T, C) logits), or (B, T, C) logits passed to cross_entropy without "
                "moving the classes to dim 1",
            ],
            fix=f"compute the loss as F.cross_entropy(logits.reshape(-1, C), "
            f"{m.own_loss}.reshape(-1)), or log_softmax(dim=-1)",
        )

    def judge(self, m: InitLossM) -> Verdict:
        ratio = m.expected / m.chance
        evidence: dict[str, object] = {
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
        if m.own_loss:
            evidence["own_loss_to_mean_cross_entropy"] = m.actual / m.expected
            wrong = self._wrong_axis(m, evidence)
            if wrong is not None:
                return wrong
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


def _sum_ratios(loss: torch.Tensor, logits: torch.Tensor) -> dict[int, float]:
    """Per dim of ``logits``: ``||sum_d g||^2 / (size_d * ||g||^2)`` for the loss's gradient
    ``g``; 0 where the loss does not change when a whole fibre along d moves together."""
    if not loss.requires_grad or not logits.requires_grad or logits.ndim == 0:
        return {}
    try:
        (grad,) = torch.autograd.grad(loss, logits, allow_unused=True)
    except RuntimeError:
        return {}
    if grad is None or not bool(torch.isfinite(grad).all()):
        return {}
    g = grad.double()
    total = float((g * g).sum())
    if total == 0.0:
        return {}
    return {
        d: float((g.sum(d) ** 2).sum()) / (g.shape[d] * total)
        for d in range(g.ndim)
        if g.shape[d] >= 2
    }
