"""param-update: Adam steps change every trainable parameter and no frozen one.

Adam moves every parameter with a non-zero gradient by about its learning rate,
whatever the gradient's scale, so "unchanged" means "no gradient", not "a tiny
gradient". A parameter that a zero-initialised gate shields at the first step
(timm's ``zero_init_last``) moves at the second, and gates nested in gates (improved
diffusion zero-initialises the last layer of every block and of the network) open
one level per step, so the check keeps stepping while more parameters start to move,
up to :data:`MAX_STEPS`, before calling anything stuck. Parameters grad-flow found
skipped at random (layer drop) or computed and discarded by library code are not
expected to move.

Frozen parameters are told apart by what they are. A fixed position table (a
frozen parameter named as positions: Whisper's sinusoidal ``embed_positions``,
PatchTST's, MAE's ``pos_embed``) is frozen by construction and is evidence only. A
frozen weight of a layer that computes (a linear layer, a convolution, an expert)
warns: intended when fine-tuning, a bug when a warm-up freeze was never undone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import backward
from torchwise.doctor.facts import owner
from torchwise.doctor.report import Status

LR = 1e-3
#: at most this many Adam steps; the check stops at the first step that moves nothing new
MAX_STEPS = 6


def is_position_table(name: str) -> bool:
    """``encoder.embed_positions.weight``, ``pos_embed``, ``positional_encoder.position_enc``."""
    parts = [p for part in name.lower().split(".") for p in part.split("_")]
    return any(p.startswith(("pos", "position")) for p in parts)


@dataclass
class ParamUpdateM:
    trainable: int
    frozen: list[str]
    fixed_tables: list[str] = field(default_factory=list)  # frozen position tables
    unchanged: list[str] = field(default_factory=list)  # after both steps
    second_step_only: list[str] = field(default_factory=list)
    moved_frozen: list[str] = field(default_factory=list)
    steps: int = 1


class ParamUpdate(Check[ParamUpdateM]):
    cost = "1-2 fwd+bwd+Adam steps"

    def measure(self, run: Run) -> ParamUpdateM | Verdict:
        ctx = run.ctx
        named = list(ctx.model.named_parameters())
        trainable = [(n, p) for n, p in named if p.requires_grad]
        frozen = [n for n, p in named if not p.requires_grad]
        tables = [n for n in frozen if is_position_table(n)]
        m = ParamUpdateM(len(trainable), [n for n in frozen if n not in tables], tables)
        frozen = m.frozen + tables
        if not trainable:
            return m
        # parameters reaching only outputs the loss does not use (BERT's pooler), skipped
        # at random in training, or computed and discarded by library code
        facts = run.facts
        secondary = set(facts.backward.secondary_only)
        missing = [n for n, g in facts.backward.grads.items() if g is None or not g.any()]
        if missing:
            secondary |= facts.skipped_at_random
            secondary |= {n for n in facts.discarded if facts.library_owned(n)}
        before = {n: p.detach().clone() for n, p in named}
        opt = torch.optim.Adam([p for _, p in trainable], lr=LR)

        def step() -> None:
            ctx.zero_grads()
            ctx.reseed()
            _, loss = ctx.train_loss()
            if loss.requires_grad:
                backward(loss)
            opt.step()

        def unchanged() -> list[str]:
            return [
                n for n, p in trainable if n not in secondary and torch.equal(before[n], p.detach())
            ]

        step()
        first = unchanged()
        m.unchanged = first
        while m.unchanged and m.steps < MAX_STEPS:
            step()
            m.steps += 1
            still = unchanged()
            progress = len(still) < len(m.unchanged)
            m.unchanged = still
            if not progress:
                break
        m.second_step_only = [n for n in first if n not in m.unchanged]
        params = dict(named)
        m.moved_frozen = [n for n in frozen if not torch.equal(before[n], params[n].detach())]
        return m

    def judge(self, m: ParamUpdateM) -> Verdict:
        total = m.trainable + len(m.frozen) + len(m.fixed_tables)
        if not m.trainable:
            return Verdict(
                Status.FAIL,
                f"all {total} parameters have requires_grad=False: nothing can train",
                evidence={"frozen": len(m.frozen)},
                where=sorted({owner(n) or "model" for n in m.frozen}),
                causes=["requires_grad_(False) / a freezing loop left in from fine-tuning"],
                fix="unfreeze the parameters you mean to train",
            )
        evidence: dict[str, object] = {
            "trainable": m.trainable,
            "changed": m.trainable - len(m.unchanged),
            "frozen": len(m.frozen),
            "optimizer": f"Adam(lr={LR:g})",
            "steps": m.steps,
        }
        if m.fixed_tables:
            evidence["fixed_position_tables"] = m.fixed_tables
        if m.second_step_only:
            evidence["changed_from_the_second_step"] = m.second_step_only
        if m.unchanged or m.moved_frozen:
            evidence["unchanged"] = m.unchanged
            causes = []
            if m.unchanged:
                causes.append(
                    "no gradient reaches them (unused layer, detached branch; see grad-flow)"
                )
            if m.moved_frozen:
                evidence["frozen_but_changed"] = m.moved_frozen
                causes.append(
                    "a frozen parameter written in place in forward (e.g. a manual EMA on an "
                    "nn.Parameter instead of a buffer)"
                )
            return Verdict(
                Status.FAIL,
                f"{len(m.unchanged)} trainable parameters did not change after {m.steps} Adam "
                "steps (the last moved no new one)"
                + (f"; {len(m.moved_frozen)} frozen ones did" if m.moved_frozen else ""),
                evidence=evidence,
                where=m.unchanged + m.moved_frozen,
                causes=causes,
                fix="keep trained layers on the loss path; keep non-trained state in buffers",
            )
        if m.frozen:
            modules = sorted({owner(n) or "model" for n in m.frozen})
            evidence["frozen_modules"] = modules
            return Verdict(
                Status.WARN,
                f"{len(m.frozen)} of {total} parameters are frozen (requires_grad=False); the "
                f"{m.trainable} trainable ones all changed",
                evidence=evidence,
                where=modules,
                causes=[
                    "a freezing loop (for p in m.parameters(): p.requires_grad = False) that was "
                    "meant for a warm-up or for another sub-network",
                ],
                fix="if the freeze is intended, ignore this warning; otherwise set "
                "requires_grad=True on these modules before building the optimizer",
            )
        how = "one Adam step" if m.steps == 1 else f"{m.steps} Adam steps"
        summary = f"{how} changed all {m.trainable} trainable parameters"
        if m.fixed_tables:
            summary += (
                f"; {len(m.fixed_tables)} fixed position tables are frozen by construction "
                "(warns on frozen weights of layers that compute)"
            )
        if m.second_step_only:
            summary += (
                f" ({len(m.second_step_only)} only after the first: zero-initialised gates "
                "hold them until the gates move)"
            )
        return Verdict(Status.PASS, summary, evidence=evidence)
