"""grad-flow: after one backward, every trainable parameter has a finite gradient.

A parameter with no gradient is either never used (its module was never called)
or cut off (called, but its output does not reach the loss). An exactly-zero
gradient is explained, not flagged, when it is caused by a parameter that starts
at zero on purpose (timm's ``zero_init_last`` residual norms, LayerScale,
adaLN-zero): the check sets those gates to small values, repeats the backward,
and accepts the zeros that disappear.

Two more explanations are measured, never assumed. A layer that gets a gradient
in a step drawn from another seed is skipped at random in training (layer drop,
stochastic depth). A parameter of an installed library's code whose value cannot
change any output (large random values leave every output bit-identical) belongs
to a result the library computes and discards by design (SD3's last block, OwlViT's
detector); in the user's own code the same finding is a bug and fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.facts import owner
from torchwise.doctor.report import Status


@dataclass
class GradFlowM:
    trainable: int
    loss: float
    unused: list[str] = field(default_factory=list)  # no grad, module never called
    detached: list[str] = field(default_factory=list)  # no grad, module called
    nonfinite: list[str] = field(default_factory=list)
    zero: list[str] = field(default_factory=list)  # exactly zero, not explained by a gate
    zero_behind_gate: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)  # zero-initialised parameters
    secondary_only: list[str] = field(default_factory=list)
    skipped_at_random: list[str] = field(default_factory=list)  # layer drop
    library_discards: list[str] = field(default_factory=list)  # no effect, library code
    error: str | None = None


class GradFlow(Check[GradFlowM]):
    cost = "1 fwd+bwd (shared with grad-scale and param-update)"

    def measure(self, run: Run) -> GradFlowM | Verdict:
        info = run.facts.backward
        if not info.grads:
            return Verdict.not_applicable("the model has no trainable parameters")
        called = set(info.call_order)
        m = GradFlowM(len(info.grads), info.loss, error=info.error,
                      secondary_only=sorted(info.secondary_only))  # fmt: skip
        skipped = (
            run.facts.skipped_at_random
            if any(g is None for g in info.grads.values())
            else frozenset()
        )
        for name, grad in info.grads.items():
            if grad is None and name in skipped:
                m.skipped_at_random.append(name)
            elif grad is None:
                (m.detached if owner(name) in called else m.unused).append(name)
            elif not bool(torch.isfinite(grad).all()):
                m.nonfinite.append(name)
            elif not bool(grad.any()):
                m.zero.append(name)
        if m.zero:
            explained = run.facts.unblocked_by_zero_init
            m.zero_behind_gate = [n for n in m.zero if n in explained]
            m.zero = [n for n in m.zero if n not in explained]
            if m.zero_behind_gate:
                m.gates = run.facts.zero_initialised
        if m.unused or m.detached or m.zero:
            facts = run.facts
            by_design = {n for n in facts.discarded if facts.library_owned(n)}
            m.library_discards = sorted(by_design & {*m.unused, *m.detached, *m.zero})
            m.unused = [n for n in m.unused if n not in by_design]
            m.detached = [n for n in m.detached if n not in by_design]
            m.zero = [n for n in m.zero if n not in by_design]
        return m

    def judge(self, m: GradFlowM) -> Verdict:
        evidence: dict[str, object] = {
            "trainable": m.trainable,
            "with_gradient": m.trainable - len(m.unused) - len(m.detached),
            "loss": m.loss,
        }
        if m.secondary_only:
            evidence["feed_only_other_outputs"] = m.secondary_only
        if m.zero_behind_gate:
            evidence["zero_at_init_behind_a_zero_gate"] = m.zero_behind_gate
            evidence["zero_initialised_gates"] = m.gates
        if m.skipped_at_random:
            evidence["skipped_at_random_in_training"] = m.skipped_at_random
        if m.library_discards:
            evidence["library_computes_and_discards"] = m.library_discards
        if m.unused or m.detached or m.nonfinite:
            return self._broken(m, evidence)
        if m.zero:
            evidence["all_zero_grad"] = m.zero
            return Verdict(
                Status.WARN,
                f"{len(m.zero)} of {m.trainable} trainable parameters get a gradient of exactly "
                "zero on this batch (warns on any exact zero not explained by a zero-initialised "
                "gate)",
                evidence=evidence,
                where=m.zero,
                causes=[
                    "the parameter is multiplied by zero or feeds only dead ReLUs",
                    "a mask or gate that is closed for the whole batch",
                ],
                fix="check the dead-units check and the layer's gating; try another batch",
            )
        summary = (
            f"all {m.trainable} trainable parameters get a finite gradient, non-zero except "
            f"where a zero-initialised gate holds it at zero"
            if m.zero_behind_gate
            else f"all {m.trainable} trainable parameters get a finite, non-zero gradient"
        )
        excused = len(m.skipped_at_random) + len(m.library_discards)
        if excused:
            summary = (
                f"every trainable parameter the model uses gets a finite, non-zero gradient; "
                f"{excused} more are skipped at random in training (layer drop) or belong to "
                "results the library computes and discards (see evidence)"
            )
        if m.zero_behind_gate:
            summary += (
                f" ({len(m.zero_behind_gate)} parameters behind {len(m.gates)} gates that start "
                "at zero on purpose, e.g. timm's zero_init_last; they train from the second step)"
            )
        return Verdict(Status.PASS, summary, evidence=evidence)

    def _broken(self, m: GradFlowM, evidence: dict[str, object]) -> Verdict:
        causes = []
        if m.unused:
            evidence["never_called"] = sorted({owner(n) for n in m.unused})
            causes.append(
                "a layer is built in __init__ but never called in forward (leftover, or "
                "forward calls a different attribute)"
            )
        if m.detached:
            evidence["called_but_no_grad"] = m.detached
            causes.append(
                "a branch's output is cut from the loss: .detach(), .item()/.numpy(), "
                "torch.no_grad() in forward, or an output that forward discards"
            )
        if m.nonfinite:
            evidence["non_finite_grad"] = m.nonfinite
            causes.append("a NaN/inf in forward or backward (see the nan-inf check)")
        if m.error:
            evidence["error"] = m.error
        where = m.unused + m.detached + m.nonfinite
        return Verdict(
            Status.FAIL,
            f"{len(where)} of {m.trainable} trainable parameters get no usable gradient",
            evidence=evidence,
            where=where,
            causes=causes,
            fix="call every layer you train and keep its output on the loss path (no detach/"
            "item/no_grad); delete layers you do not use, or freeze them on purpose",
        )
