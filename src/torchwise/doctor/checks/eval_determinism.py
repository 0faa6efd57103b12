"""eval-determinism: two forwards in eval mode give bit-identical outputs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from torchwise.doctor.checks._compare import max_abs_diff
from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.report import Status
from torchwise.doctor.trace import first_divergence, recording


@dataclass
class EvalDeterminismM:
    diff: float
    where: tuple[str, str] | None


class EvalDeterminism(Check[EvalDeterminismM]):
    cost = "2 fwd"

    def measure(self, run: Run) -> EvalDeterminismM:
        ctx = run.ctx
        with torch.no_grad():
            with recording(ctx.model) as first:
                y0 = ctx.forward(train=False)
            with recording(ctx.model) as second:
                y1 = ctx.forward(train=False)
        diff = max_abs_diff(y0, y1)
        return EvalDeterminismM(
            diff, first_divergence(first, second, lambda t: t) if diff else None
        )

    def judge(self, m: EvalDeterminismM) -> Verdict:
        if m.diff == 0.0:
            return Verdict(
                Status.PASS,
                "two forwards in eval mode give bit-identical outputs (fails on any difference)",
                evidence={"max_abs_diff": 0.0},
            )
        evidence: dict[str, object] = {"max_abs_diff": m.diff}
        if m.where:
            evidence["first_divergence"] = m.where[1]
        return Verdict(
            Status.FAIL,
            f"two forwards in eval mode differ (max abs diff {m.diff:.3g})",
            evidence=evidence,
            where=[m.where[0]] if m.where else [],
            causes=[
                "F.dropout(x, p) without training=self.training (its default is training=True)",
                "random noise or augmentation in forward that ignores self.training",
                "state carried between calls on self (a cached hidden state, a call counter)",
            ],
            fix="use nn.Dropout modules or F.dropout(x, p, training=self.training); gate any "
            "randomness on self.training; keep no per-call state on the module",
        )
