"""dead-units: the share of ReLU-family units never active on the batch, per call.

A dispatch mode sees every ``relu``/``hardtanh(0, x)`` call, functional ones
included; units are channels (dim 1) for ``(B, C, ...)`` activations and the last
dim for ``(B, F)`` and ``(B, T, F)``.
"""

from __future__ import annotations

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


class _ReluWatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Counts, per ReLU-family call, the units never active on the batch."""

    def __init__(self, stack: list[str], root: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.stack, self.root = stack, root
        self.calls: dict[str, tuple[int, int]] = {}  # label -> (dead units, units)

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
            self.calls[label] = (int((~active).sum()), active.numel())
        return out


@dataclass
class DeadUnitsM:
    calls: dict[str, tuple[int, int]]
    batch: int


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
        shares = {k: dead / units for k, (dead, units) in m.calls.items()}
        worst = max(shares, key=shares.__getitem__)
        evidence: dict[str, Any] = {
            "relu_calls": len(shares),
            "worst_layer": worst,
            "worst_dead_share": shares[worst],
            "units_in_worst": m.calls[worst][1],
            "batch": m.batch,
        }
        thresholds = f"warns at {WARN_SHARE:.0%}, fails at {FAIL_SHARE:.0%}"
        flagged = sorted(
            (k for k, v in shares.items() if v >= WARN_SHARE), key=lambda k: -shares[k]
        )
        if not flagged:
            return Verdict(
                Status.PASS,
                f"at most {shares[worst]:.0%} of units never activate in any of {len(shares)} "
                f"ReLU calls ({thresholds})",
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
