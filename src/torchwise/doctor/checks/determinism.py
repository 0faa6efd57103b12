"""determinism: the same ``torch.manual_seed`` gives the same outputs and gradients.

If it does not, the runs are repeated with numpy's and python's RNGs seeded too:
reproducible then means forward draws from those (a warning: torch's seed alone
is not enough); still different means an unseeded source or a non-deterministic
kernel (a failure).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from torchwise.doctor.checks._compare import max_abs_diff
from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import Context, backward
from torchwise.doctor.report import Status
from torchwise.doctor.state import Snapshot
from torchwise.doctor.tensors import tensors_in
from torchwise.doctor.trace import Trace, first_divergence, recording


@dataclass
class DeterminismM:
    seed: int
    output_diff: float
    grad_diff: float
    where: tuple[str, str] | None = None
    reproducible_with_all_rngs: bool = False


def _seeded_step(
    ctx: Context, seed: int, all_rngs: bool, record: bool = False
) -> tuple[Any, list[Any], Trace]:
    torch.manual_seed(seed)
    if all_rngs:
        random.seed(seed)
        try:
            import numpy as np

            np.random.seed(seed)
        except ImportError:  # pragma: no cover - numpy is optional
            pass
    ctx.zero_grads()
    trace = Trace()
    if record:
        with recording(ctx.model) as trace:
            out, loss = ctx.train_loss()
    else:
        out, loss = ctx.train_loss()
    if loss.requires_grad:
        backward(loss)
    grads = [None if p.grad is None else p.grad.clone() for p in ctx.model.parameters()]
    return [t.detach().clone() for t in tensors_in(out)], grads, trace


class Determinism(Check[DeterminismM]):
    cost = "2-4 fwd+bwd"

    def measure(self, run: Run) -> DeterminismM:
        ctx = run.ctx
        seed = ctx.options.seed
        start = Snapshot(ctx.model)  # both runs start from the same model state
        out0, g0, _ = _seeded_step(ctx, seed, all_rngs=False)
        start.restore(rng=False)  # numpy/python RNGs move on, as in real training
        out1, g1, _ = _seeded_step(ctx, seed, all_rngs=False)
        m = DeterminismM(
            seed,
            max_abs_diff(out0, out1),
            max_abs_diff([g for g in g0 if g is not None], [g for g in g1 if g is not None]),
        )
        if m.output_diff == 0.0 and m.grad_diff == 0.0:
            return m
        start.restore(rng=False)  # two more runs, recorded, say where they part
        _, _, t0 = _seeded_step(ctx, seed, all_rngs=False, record=True)
        start.restore(rng=False)
        _, _, t1 = _seeded_step(ctx, seed, all_rngs=False, record=True)
        m.where = first_divergence(t0, t1, lambda t: t)
        start.restore(rng=False)
        out2, _, _ = _seeded_step(ctx, seed, all_rngs=True)
        start.restore(rng=False)
        out3, _, _ = _seeded_step(ctx, seed, all_rngs=True)
        m.reproducible_with_all_rngs = max_abs_diff(out2, out3) == 0.0
        return m

    def judge(self, m: DeterminismM) -> Verdict:
        evidence: dict[str, Any] = {
            "seed": m.seed,
            "output_diff": m.output_diff,
            "grad_diff": m.grad_diff,
        }
        if m.output_diff == 0.0 and m.grad_diff == 0.0:
            return Verdict(
                Status.PASS,
                "torch.manual_seed reproduces the outputs and gradients bit for bit (fails on "
                "any difference)",
                evidence=evidence,
            )
        if m.where:
            evidence["first_divergence"] = m.where[1]
        where = [m.where[0]] if m.where else []
        if m.reproducible_with_all_rngs:
            return Verdict(
                Status.WARN,
                "forward draws from numpy or python `random`: torch.manual_seed alone does not "
                "reproduce it",
                evidence=evidence,
                where=where,
                causes=["np.random / random used inside forward (noise, augmentation, sampling)"],
                fix="draw randomness with torch (torch.rand(..., device=x.device)) so one "
                "torch.manual_seed reproduces the run, and torch.utils.data seeds workers",
            )
        return Verdict(
            Status.FAIL,
            f"the same seed gives different results (output diff {m.output_diff:.3g}, grad diff "
            f"{m.grad_diff:.3g})",
            evidence=evidence,
            where=where,
            causes=[
                "a non-deterministic kernel (scatter_add/index_add on GPU, atomics)",
                "randomness from an unseeded source (os.urandom, time, a private Generator "
                "seeded at import)",
            ],
            fix="torch.use_deterministic_algorithms(True) names the op; seed every generator",
        )
