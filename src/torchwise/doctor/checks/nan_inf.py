"""nan-inf: parameters, output, loss and gradients are finite; names where a NaN starts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import backward
from torchwise.doctor.report import Status
from torchwise.doctor.trace import first_nonfinite, recording
from torchwise.tensortree import tensors_in


@dataclass
class NanInfM:
    bad_params: list[str]
    output_finite: bool = True
    loss: float = 0.0
    blame: tuple[str, str] | None = None
    bad_grads: list[str] = field(default_factory=list)


def _finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())


class NanInf(Check[NanInfM]):
    cost = "1 fwd+bwd with module recording"

    def measure(self, run: Run) -> NanInfM:
        ctx = run.ctx
        params = ctx.model.named_parameters()
        m = NanInfM([n for n, p in params if not bool(torch.isfinite(p).all())])
        if m.bad_params:
            return m
        ctx.zero_grads()
        ctx.reseed()
        out, loss = ctx.train_loss()
        m.output_finite = _finite(tensors_in(out))
        m.loss = float(loss.detach())
        if not m.output_finite:
            ctx.reseed()  # the same run again, recorded module by module, to say where
            with torch.no_grad(), recording(ctx.model) as trace:
                ctx.train_loss()
            m.blame = first_nonfinite(trace)
            return m
        if math.isfinite(m.loss) and loss.requires_grad:
            backward(loss)
            m.bad_grads = [
                n
                for n, p in ctx.model.named_parameters()
                if p.grad is not None and not bool(torch.isfinite(p.grad).all())
            ]
        return m

    def judge(self, m: NanInfM) -> Verdict:
        if m.bad_params:
            return Verdict(
                Status.FAIL,
                f"{len(m.bad_params)} parameters already hold NaN/inf before any forward",
                where=m.bad_params,
                causes=[
                    "a broken custom init (e.g. division by a zero fan-in)",
                    "a bad checkpoint",
                ],
                fix="re-initialize or reload these parameters",
            )
        evidence: dict[str, object] = {"output_finite": m.output_finite, "loss": m.loss}
        if not m.output_finite:
            if m.blame:
                evidence["first_non_finite"] = m.blame[1]
            return Verdict(
                Status.FAIL,
                "the forward output contains NaN or inf",
                evidence=evidence,
                where=[m.blame[0]] if m.blame else [],
                causes=[
                    "log/sqrt/pow of a negative or zero value (log of an un-clamped input)",
                    "division by a value that can be zero (a std or norm without eps)",
                    "exp of a large value overflowing (a hand-written softmax without the max "
                    "subtraction)",
                ],
                fix="clamp before log/sqrt (x.clamp_min(eps)), add eps to denominators, use "
                "torch.logsumexp / F.log_softmax instead of hand-written versions",
            )
        if not math.isfinite(m.loss):
            return Verdict(
                Status.FAIL,
                "the output is finite but the loss is not",
                evidence=evidence,
                causes=["labels outside the valid range", "log(0) in a hand-written loss"],
                fix="compute the loss from logits with the fused torch losses",
            )
        evidence["params_with_non_finite_grad"] = len(m.bad_grads)
        if m.bad_grads:
            return Verdict(
                Status.FAIL,
                f"forward and loss are finite but {len(m.bad_grads)} gradients are NaN/inf",
                evidence=evidence,
                where=m.bad_grads,
                causes=[
                    "the derivative is infinite at the point: sqrt(0), norm of a zero vector, "
                    "pow(x, p<1) at 0, acos/asin at +-1",
                ],
                fix="add eps inside the sqrt/norm (torch.sqrt(x + eps)) or clamp the argument",
            )
        return Verdict(
            Status.PASS,
            "parameters, output, loss and every gradient are finite (fails on any NaN or inf)",
            evidence=evidence,
        )
