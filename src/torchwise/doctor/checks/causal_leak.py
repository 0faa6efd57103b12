"""causal-leak: with ``--causal DIM``, outputs at positions 0..t ignore inputs after t.

``t = (T - 1) // 2``: the first half of the sequence must not see the second.
The check runs in eval mode with every compared forward reseeded (see
:mod:`._dependence`), so dropout left on in eval is not mistaken for a leak.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from torchwise.doctor.checks._dependence import grad_dependence, leaked, locate, perturbed
from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.report import Status
from torchwise.tensortree import tensors_in


@dataclass
class CausalM:
    dim: int
    length: int
    t: int
    method: str = "input gradient"
    grads: dict[str, float] = field(default_factory=dict)
    leaks: bool = False
    where: tuple[str, str] | None = None


class CausalLeak(Check[CausalM]):
    cost = "1 fwd+bwd (float inputs) or 2 fwd (token perturbation)"

    def measure(self, run: Run) -> CausalM | Verdict:
        ctx = run.ctx
        d = ctx.options.causal_dim
        if d is None:
            return Verdict.not_applicable("not a causal model (pass --causal DIM to check one)")
        sized = [t for t in tensors_in(ctx.fresh_inputs()) if t.ndim > d]
        if not sized:
            return Verdict.cannot_run(f"no input has a dim {d} (--causal {d})")
        T = int(sized[0].shape[d])
        if len(ctx.output_shape) <= d or ctx.output_shape[d] != T:
            return Verdict.cannot_run(
                f"the output {list(ctx.output_shape)} has no dim {d} of the input's length {T}"
            )
        if T < 2:
            return Verdict.cannot_run(f"needs a sequence of at least 2 along dim {d}, not {T}")
        t = (T - 1) // 2  # positions 0..t must not see positions t+1..T-1

        def past(x: torch.Tensor) -> torch.Tensor | None:
            return x.narrow(d, 0, t + 1) if x.ndim > d and x.shape[d] == T else None

        def future(x: torch.Tensor) -> torch.Tensor | None:
            return x.narrow(d, t + 1, T - t - 1) if x.ndim > d and x.shape[d] == T else None

        def split(x: torch.Tensor) -> Any:
            p, f = past(x), future(x)
            return None if p is None or f is None else (p, f)

        m = CausalM(d, T, t)
        dep = grad_dependence(ctx, False, lambda y: y.narrow(d, 0, t + 1), split)
        if dep is None:
            m.method = "perturbation of the positions after t"
            m.leaks, m.where = locate(ctx, perturbed(ctx, future), past)
        else:
            m.grads = {"grad_from_future": dep[0], "grad_from_past": dep[1]}
            m.leaks = leaked(dep)
            if m.leaks:
                m.where = locate(ctx, perturbed(ctx, future), past)[1]
        return m

    def judge(self, m: CausalM) -> Verdict:
        evidence: dict[str, Any] = {
            "dim": m.dim,
            "length": m.length,
            "checked_positions": f"0..{m.t}",
            "method": m.method,
            **m.grads,
        }
        if not m.leaks:
            return Verdict(
                Status.PASS,
                f"positions 0..{m.t} do not depend on positions {m.t + 1}..{m.length - 1} along "
                f"dim {m.dim} ({m.method}; fails on any dependence above 1e-06 of the own one)",
                evidence=evidence,
            )
        if m.where:
            evidence["first_divergence"] = m.where[1]
        return Verdict(
            Status.FAIL,
            f"outputs at positions 0..{m.t} change with inputs at positions "
            f"{m.t + 1}..{m.length - 1} (dim {m.dim})",
            evidence=evidence,
            where=[m.where[0]] if m.where else [],
            causes=[
                "attention without a causal mask (is_causal=False / mask not applied)",
                "an off-by-one mask (torch.triu(..., diagonal=0) masks too little)",
                "a convolution or pooling over time that is not left-padded",
                "a normalization or mean over the time dim",
            ],
            fix="mask scores with torch.tril(torch.ones(T, T)) (or pass is_causal=True to "
            "F.scaled_dot_product_attention); left-pad temporal convolutions",
        )
