"""dead-units: the share of ReLU-family units never active on the batch, per call.

A dispatch mode sees every ``relu``/``hardtanh(0, x)`` call, functional ones
included; units are channels (dim 1) for ``(B, C, ...)`` activations and the last
dim for ``(B, F)`` and ``(B, T, F)``.

Calibrated against chance. A healthy unit at initialisation is active about half
the time, so a unit seen on ``n`` values (samples times positions) is never active
with probability ``0.5 ** n``: on a squeeze-and-excitation layer that sees one value
per sample, half of two units can be silent on a batch of two by chance alone. A
layer is flagged only when so many dead units would happen by chance with
probability under :data:`CHANCE` (binomial tail), on top of the share thresholds.
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


class _ReluWatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Counts, per ReLU-family call, the units never active on the batch."""

    def __init__(self, stack: list[str], root: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.stack, self.root = stack, root
        #: label -> (dead units, units, values each unit saw)
        self.calls: dict[str, tuple[int, int, int]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func._overloadpacket.__name__
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
            self.calls[label] = (int((~active).sum()), active.numel(), seen)
        return out


@dataclass
class DeadUnitsM:
    calls: dict[str, tuple[int, int, int]]  # label -> (dead, units, values per unit)
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
        shares = {k: dead / units for k, (dead, units, _) in m.calls.items()}
        chance = {k: chance_of_dead(*m.calls[k]) for k in m.calls}
        worst = max(shares, key=lambda k: (chance[k] < CHANCE, shares[k]))
        evidence: dict[str, Any] = {
            "relu_calls": len(shares),
            "worst_layer": worst,
            "worst_dead_share": shares[worst],
            "units_in_worst": m.calls[worst][1],
            "values_per_unit_in_worst": m.calls[worst][2],
            "chance_for_healthy_units": chance[worst],
            "batch": m.batch,
        }
        thresholds = (
            f"warns at {WARN_SHARE:.0%}, fails at {FAIL_SHARE:.0%}, when that many dead units "
            f"would happen by chance with probability under {CHANCE:g}"
        )
        flagged = sorted(
            (k for k, v in shares.items() if v >= WARN_SHARE and chance[k] < CHANCE),
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
