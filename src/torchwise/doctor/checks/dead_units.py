"""dead-units: the share of ReLU-family units never active on the batch, per call.

A dispatch mode sees every ``relu``/``hardtanh(0, x)`` call, functional ones
included; units are channels (dim 1) for ``(B, C, ...)`` activations and the last
dim for ``(B, F)`` and ``(B, T, F)``.

Calibrated against chance, twice. A healthy unit at initialisation is active about
half the time, so a unit seen on ``n`` independent values is never active with
probability ``0.5 ** n``; a layer is flagged only when so many dead units would happen
by chance with probability under :data:`CHANCE` (binomial tail). And the values are not
always independent: a squeeze-and-excitation layer sees one pooled value per sample,
nearly the same for every sample, so with random weights half its units sit below
zero for the whole batch. What a bug does instead is shift the pre-activations of the
whole layer below zero (a bias of -5): the layer is flagged only when the median of
its units' mean pre-activations is below zero by more than chance allows for random
weights, :data:`SHIFT` standard errors of a median (``1.25 std / sqrt(units)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.report import Status
from torchwise.hooks import module_calls

_RELU_OPS = {"relu", "relu_", "hardtanh", "hardtanh_", "threshold", "threshold_"}
WARN_SHARE = 0.5
FAIL_SHARE = 0.9
#: flag a layer only when its dead units are this unlikely for healthy units
CHANCE = 1e-3
#: ... and its pre-activations are shifted below zero: the median of the units' means
#: is this many standard errors below zero (random weights put it within about one)
SHIFT = -3.0


class _ReluWatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Counts, per ReLU-family call, the units never active on the batch."""

    def __init__(self, stack: list[str], root: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.stack, self.root = stack, root
        #: label -> (dead units, units, values each unit saw, pre-activation shift)
        self.calls: dict[str, tuple[int, int, int, float]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func._overloadpacket.__name__
        pre = args[0] if args and isinstance(args[0], torch.Tensor) else None
        shift = _shift(pre) if name in _RELU_OPS and pre is not None and pre.ndim >= 2 else 0.0
        out = func(*args, **(kwargs or {}))
        if name.startswith("hardtanh") and len(args) > 1 and float(args[1]) != 0.0:
            return out  # hardtanh(-1, 1) is not ReLU-like; ReLU6 is hardtanh(0, 6)
        if name in _RELU_OPS and isinstance(out, torch.Tensor) and out.ndim >= 2:
            unit_dim = 1 if out.ndim != 3 else out.ndim - 1
            active = (out > 0).movedim(unit_dim, 0).reshape(out.shape[unit_dim], -1).any(1)
            base = (self.stack[-1] or self.root) if self.stack else "forward"
            label, n = base, 2
            while label in self.calls:
                label, n = f"{base} (call {n})", n + 1
            seen = out.numel() // max(out.shape[unit_dim], 1)  # values per unit
            self.calls[label] = (int((~active).sum()), active.numel(), seen, shift)
        return out


def _shift(pre: torch.Tensor) -> float:
    """The median of the units' mean pre-activations, in standard errors of a median of
    that many units (``1.2533 * std / sqrt(units)``); -inf for a constant negative shift."""
    unit_dim = 1 if pre.ndim != 3 else pre.ndim - 1
    values = pre.detach().movedim(unit_dim, 0).reshape(pre.shape[unit_dim], -1).double()
    means = values.mean(1)
    median = float(means.median())
    spread = float(means.std()) if means.numel() > 1 else 0.0
    error = 1.2533 * spread / math.sqrt(means.numel())
    if error > 1e-12 * max(float(values.abs().max()), 1e-30):
        return median / error
    return -math.inf if median < 0 else 0.0


@dataclass
class DeadUnitsM:
    #: label -> (dead, units, values per unit, pre-activation shift)
    calls: dict[str, tuple[int, int, int, float]]
    batch: int | None


def chance_of_dead(dead: int, units: int, seen: int) -> float:
    """P(at least ``dead`` of ``units`` healthy units are never active on ``seen`` values
    each), each silent with probability ``0.5 ** seen``: the binomial upper tail."""
    if dead <= 0:
        return 1.0
    p = 0.5**seen
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(units + 1) - math.lgamma(k + 1) - math.lgamma(units - k + 1)
        + k * log_p + (units - k) * log_q
        for k in range(dead, units + 1)
    ]  # fmt: skip
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


class DeadUnits(Check[DeadUnitsM]):
    cost = "1 fwd"

    def measure(self, run: Run) -> DeadUnitsM | Verdict:
        ctx = run.ctx
        with module_calls(ctx.model) as calls:
            watch = _ReluWatch(calls.stack, type(ctx.model).__name__)
            with torch.no_grad(), watch:
                ctx.forward(train=True)
        if not watch.calls:
            return Verdict.not_applicable("no ReLU-family activation ran in forward")
        return DeadUnitsM(watch.calls, ctx.batch_size)

    def judge(self, m: DeadUnitsM) -> Verdict:
        shares = {k: call[0] / call[1] for k, call in m.calls.items()}
        chance = {k: chance_of_dead(*m.calls[k][:3]) for k in m.calls}
        shifted = {k for k, call in m.calls.items() if call[3] < SHIFT}
        unlikely = {k for k in m.calls if chance[k] < CHANCE and k in shifted}
        worst = max(shares, key=lambda k: (k in unlikely, shares[k]))
        evidence: dict[str, Any] = {
            "relu_calls": len(shares),
            "worst_layer": worst,
            "worst_dead_share": shares[worst],
            "units_in_worst": m.calls[worst][1],
            "values_per_unit_in_worst": m.calls[worst][2],
            "chance_for_healthy_units": chance[worst],
            "pre_activation_shift_in_worst": m.calls[worst][3],
            "batch": m.batch,
        }
        thresholds = (
            f"warns at {WARN_SHARE:.0%}, fails at {FAIL_SHARE:.0%}, when that many dead units "
            f"would happen by chance with probability under {CHANCE:g} and the layer's "
            f"pre-activations are shifted below zero (the units' median mean {-SHIFT:g} "
            "standard errors under zero)"
        )
        flagged = sorted(
            (k for k, v in shares.items() if v >= WARN_SHARE and k in unlikely),
            key=lambda k: -shares[k],
        )
        if not flagged:
            top = max(shares.values())
            return Verdict(
                Status.PASS,
                f"at most {top:.0%} of units never activate in any of {len(shares)} ReLU "
                f"calls, no more than chance explains ({thresholds})",
                evidence=evidence,
            )
        evidence["dead_share_by_layer"] = {k: round(shares[k], 3) for k in flagged[:8]}
        return Verdict(
            Status.FAIL if shares[worst] >= FAIL_SHARE else Status.WARN,
            f"`{worst}`: {shares[worst]:.0%} of its units never activate on this batch "
            f"({thresholds})",
            evidence=evidence,
            where=flagged,
            causes=[
                "a large negative bias or a mean-shifted input pushes pre-activations below 0",
                "a learning rate that killed the units (after training)",
                "inputs not normalized (e.g. all negative)",
            ],
            fix="initialize biases at 0, normalize inputs and pre-activations (BatchNorm/"
            "LayerNorm), or use LeakyReLU/GELU",
        )
