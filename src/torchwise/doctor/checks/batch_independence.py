"""batch-independence: in eval mode, sample i's output depends on sample i's input only.

The batch is the inputs' ``batch_dim`` (``--batch-dim``; 1 for time-first models)
and the output's matching dim. Samples 0 and B-1 are tested. An output that compares
samples by design, a ``(B, B)`` similarity matrix (contrastive logits), is held to the
same rule pair by pair: entry ``(i, j)`` may depend on samples i and j and on no other.
BatchNorm mixing samples in train mode is expected and reported as evidence, not
judged. Inputs with no batch dim (``batch_dim=None``: one graph) have no samples to
keep apart, so the check does not apply.
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
    pairwise: bool = False
    grads: dict[str, float] = field(default_factory=dict)
    leak_row: int | None = None
    where: tuple[str, str] | None = None
    bn_mixing_in_train: list[str] = field(default_factory=list)


def _others(batch: int, own: set[int], device: torch.device) -> torch.Tensor:
    """The indices of the samples outside ``own``, on the inputs' device."""
    return torch.tensor([k for k in range(batch) if k not in own], device=device)


class BatchIndependence(Check[BatchM]):
    cost = "2 fwd+bwd (float inputs) or 4 fwd (integer inputs), +1 fwd+bwd with BatchNorm"

    def measure(self, run: Run) -> BatchM | Verdict:
        ctx = run.ctx
        B, bd, od = ctx.batch_size, ctx.batch_dim, ctx.output_batch_dim
        if B is None or bd is None:
            return Verdict.not_applicable(
                "the inputs have no batch dim (batch_dim=None): they are one example, so "
                "there are no samples to keep apart"
            )
        if B < 2 or (ctx.pairwise and B < 3):
            need = 3 if ctx.pairwise else 2
            return Verdict.cannot_run(f"needs a batch of at least {need} (dim {bd} is {B})")
        if od is None:
            return Verdict.cannot_run(
                f"the output {list(ctx.output_shape)} has no dim of the batch size {B} "
                f"(batch dim {bd} of the inputs); pass --batch-dim if the batch is elsewhere"
            )
        m = BatchM(B, bd, od, pairwise=ctx.pairwise)
        for i in sorted({0, B - 1}):
            # a similarity matrix's entry (i, j) compares samples i and j: both are "own"
            j = (B - 1 if i == 0 else 0) if ctx.pairwise else i
            own = {i, j}
            others = _others(B, own, ctx.device)

            def split(t: torch.Tensor, own: set[int] = own, others: torch.Tensor = others) -> Any:
                if not ctx.has_batch(t):
                    return None
                mine = torch.tensor(sorted(own), device=t.device)
                return t.index_select(bd, mine), t.index_select(bd, others.to(t.device))

            dep = grad_dependence(ctx, False, self._select(od, i, j, ctx.pairwise), split)
            row = self._row(ctx, od, i, j, ctx.pairwise)
            if dep is None:  # integer inputs or no grad path: perturb the other rows instead
                m.method = "perturbation of the other samples"
                differs, where = locate(ctx, perturbed(ctx, self._rows_except(ctx, own)), row)
                if differs:
                    m.leak_row, m.where = i, where
                    break
            else:
                m.grads[f"from_other_samples_row{i}"] = dep[0]
                m.grads[f"from_own_sample_row{i}"] = dep[1]
                if leaked(dep):
                    m.leak_row = i
                    m.where = locate(ctx, perturbed(ctx, self._rows_except(ctx, own)), row)[1]
                    break
        if m.leak_row is None:
            m.bn_mixing_in_train = self._batchnorm_mixing(ctx, B, bd, od)
        return m

    @staticmethod
    def _select(od: int, i: int, j: int, pairwise: bool) -> Callable[[torch.Tensor], torch.Tensor]:
        if pairwise:
            return lambda y: y.select(od, i).select(od, j)
        return lambda y: y.select(od, i)

    @staticmethod
    def _rows_except(ctx: Context, own: set[int]) -> Any:
        B, bd = ctx.batch_size, ctx.batch_dim
        assert B is not None and bd is not None
        lo, hi = min(own), max(own)

        def region(t: torch.Tensor) -> torch.Tensor | None:
            if not ctx.has_batch(t):
                return None
            # a view the perturbation can write into: the samples between or after own
            if hi - lo > 1:
                return t.narrow(bd, lo + 1, hi - lo - 1)
            return t.narrow(bd, hi + 1, B - hi - 1) if hi + 1 < B else t.narrow(bd, 0, lo)

        return region

    @staticmethod
    def _row(ctx: Context, od: int, i: int, j: int, pairwise: bool) -> Any:
        if pairwise:
            return lambda t: t.select(od, i).select(od, j) if ctx.has_batch(t, od) else None
        return lambda t: t.select(od, i) if ctx.has_batch(t, od) else None

    @staticmethod
    def _batchnorm_mixing(ctx: Context, B: int, bd: int, od: int) -> list[str]:
        bns = [
            n
            for n, m in ctx.model.named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm)
        ]
        if not bns or not any(ctx.has_batch(t) for t in ctx.float_inputs()):
            return []
        others = _others(B, {0}, ctx.device)
        dep = grad_dependence(
            ctx,
            True,
            lambda y: y.select(od, 0),
            lambda t: (
                (t.select(bd, 0), t.index_select(bd, others.to(t.device)))
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
        if m.pairwise:
            evidence["pairwise_output"] = "(B, B): entry (i, j) may depend on samples i and j"
        summary = (
            f"in eval mode, samples 0 and {m.batch - 1} depend on no other sample ({m.method}; "
            f"batch dim {m.batch_dim}; fails on any dependence above {1e-6:g} of the own one)"
        )
        if m.pairwise:
            summary = (
                f"in eval mode, entries (0, {m.batch - 1}) and ({m.batch - 1}, 0) of the "
                f"({m.batch}, {m.batch}) similarity matrix depend only on their two samples "
                f"({m.method}; fails on any dependence above {1e-6:g} of theirs)"
            )
        if m.bn_mixing_in_train:
            evidence["batchnorm_mixes_in_train_mode"] = m.bn_mixing_in_train
            summary += (
                f"; {len(m.bn_mixing_in_train)} BatchNorm layers mix samples in train mode "
                "(expected)"
            )
        return Verdict(Status.PASS, summary, evidence=evidence)
