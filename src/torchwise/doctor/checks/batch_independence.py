"""batch-independence: in eval mode, sample i's output depends on sample i's input only.

The batch is the inputs' ``batch_dim`` (``--batch-dim``; 1 for time-first models)
and the output's matching dim. Samples 0 and B-1 are tested. BatchNorm mixing
samples in train mode is expected and reported as evidence, not judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from torchwise.doctor.checks._dependence import grad_dependence, leaked, locate, perturbed
from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import Context
from torchwise.doctor.report import Status


@dataclass
class BatchM:
    batch: int
    batch_dim: int
    output_batch_dim: int
    method: str = "input gradient"
    grads: dict[str, float] = field(default_factory=dict)
    leak_row: int | None = None
    where: tuple[str, str] | None = None
    bn_mixing_in_train: list[str] = field(default_factory=list)


def _others(ctx: Context, i: int) -> torch.Tensor:
    mask = torch.ones(ctx.batch_size, dtype=torch.bool)
    mask[i] = False
    return mask


class BatchIndependence(Check[BatchM]):
    cost = "2 fwd+bwd (float inputs) or 4 fwd (integer inputs), +1 fwd+bwd with BatchNorm"

    def measure(self, run: Run) -> BatchM | Verdict:
        ctx = run.ctx
        B, bd, od = ctx.batch_size, ctx.batch_dim, ctx.output_batch_dim
        if B < 2:
            return Verdict.cannot_run(f"needs a batch of at least 2 (dim {bd} is {B})")
        if od is None:
            return Verdict.cannot_run(
                f"the output {list(ctx.output_shape)} has no dim of the batch size {B} "
                f"(batch dim {bd} of the inputs); pass --batch-dim if the batch is elsewhere"
            )
        m = BatchM(B, bd, od)
        for i in sorted({0, B - 1}):
            mask = _others(ctx, i)

            def split(t: torch.Tensor, i: int = i, mask: torch.Tensor = mask) -> Any:
                if not ctx.has_batch(t):
                    return None
                return t.select(bd, i), t.index_select(bd, mask.nonzero().flatten().to(t.device))

            dep = grad_dependence(ctx, False, self._select(od, i), split)
            if dep is None:  # integer inputs or no grad path: perturb the other rows instead
                m.method = "perturbation of the other samples"
                differs, where = locate(ctx, perturbed(ctx, self._rows_except(ctx, i)),
                                        self._row(ctx, od, i))  # fmt: skip
                if differs:
                    m.leak_row, m.where = i, where
                    break
            else:
                m.grads[f"from_other_samples_row{i}"] = dep[0]
                m.grads[f"from_own_sample_row{i}"] = dep[1]
                if leaked(dep):
                    m.leak_row = i
                    changed = perturbed(ctx, self._rows_except(ctx, i))
                    m.where = locate(ctx, changed, self._row(ctx, od, i))[1]
                    break
        if m.leak_row is None:
            m.bn_mixing_in_train = self._batchnorm_mixing(ctx)
        return m

    @staticmethod
    def _select(od: int, i: int) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda y: y.select(od, i)

    @staticmethod
    def _rows_except(ctx: Context, i: int) -> Any:
        B, bd = ctx.batch_size, ctx.batch_dim

        def region(t: torch.Tensor) -> torch.Tensor | None:
            if not ctx.has_batch(t):
                return None
            # a view the perturbation can write into: the samples after i, or before it
            return t.narrow(bd, i + 1, B - i - 1) if i == 0 else t.narrow(bd, 0, i)

        return region

    @staticmethod
    def _row(ctx: Context, od: int, i: int) -> Any:
        return lambda t: t.select(od, i) if ctx.has_batch(t, od) else None

    @staticmethod
    def _batchnorm_mixing(ctx: Context) -> list[str]:
        bns = [
            n
            for n, m in ctx.model.named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm)
        ]
        if not bns or not any(ctx.has_batch(t) for t in ctx.float_inputs()):
            return []
        mask = _others(ctx, 0)
        bd, od = ctx.batch_dim, ctx.output_batch_dim or 0
        dep = grad_dependence(
            ctx,
            True,
            lambda y: y.select(od, 0),
            lambda t: (
                (t.select(bd, 0), t.index_select(bd, mask.nonzero().flatten()))
                if ctx.has_batch(t)
                else None
            ),
        )
        return bns if leaked(dep) else []

    def judge(self, m: BatchM) -> Verdict:
        evidence: dict[str, Any] = {
            "batch": m.batch,
            "batch_dim": m.batch_dim,
            "output_batch_dim": m.output_batch_dim,
            "mode": "eval",
            "method": m.method,
            **m.grads,
        }
        if m.leak_row is not None:
            if m.where:
                evidence["first_divergence"] = m.where[1]
            return Verdict(
                Status.FAIL,
                f"in eval mode, the output for sample {m.leak_row} depends on other samples "
                f"in the batch (batch dim {m.batch_dim})",
                evidence=evidence,
                where=[m.where[0]] if m.where else [],
                causes=[
                    "a view/reshape that mixes the batch dim with another one (e.g. "
                    "(T, B, C) reshaped as (B, T*C), or x.view(-1, n) with the wrong n)",
                    "a softmax, norm, mean or sum over the batch dim instead of a feature dim",
                    "BatchNorm with track_running_stats=False (uses batch statistics in eval)",
                    "the batch is not dim 0 (time-first (T, B) inputs): pass --batch-dim 1",
                ],
                fix="keep the batch dim intact through every view/permute (x.flatten(1), "
                "x.reshape(x.size(0), -1)); reduce over feature dims, never the batch",
            )
        summary = (
            f"in eval mode, samples 0 and {m.batch - 1} depend on no other sample ({m.method}; "
            f"batch dim {m.batch_dim}; fails on any dependence above {1e-6:g} of the own one)"
        )
        if m.bn_mixing_in_train:
            evidence["batchnorm_mixes_in_train_mode"] = m.bn_mixing_in_train
            summary += (
                f"; {len(m.bn_mixing_in_train)} BatchNorm layers mix samples in train mode "
                "(expected)"
            )
        return Verdict(Status.PASS, summary, evidence=evidence)
