"""grad-scale: do weight gradients shrink or grow with depth?

Depth is compared like for like. Where the model repeats a block (``h.0`` ..
``h.11``, ``layers.0`` .. ``layers.11``), each weight role (``h.#.attn.c_attn.weight``)
is compared between its first and its last block, and the role whose change is the
median of all roles' is judged: vanishing or exploding gradients move every role
together, while one role can be near zero for reasons of its own (the keys of an
attention over a few nearly equal tokens get almost no gradient at initialisation);
a model without repeated blocks compares its first weight layer with its last, in
call order. Comparing different roles would judge architecture, not
depth: BERT's classifier gets a gradient 10^5 times larger per element than its
first query projection, because the loss reaches the encoder through one token.

Per-element RMS, so a 3x3x3x64 conv and a 512x10 head compare fairly. Embedding
tables are left out: only the rows of the tokens in the batch get a gradient,
so their RMS falls with the vocabulary size, not with depth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.facts import owner
from torchwise.doctor.report import Status

WARN_RATIO = 1e3  # warn outside [1/WARN_RATIO, WARN_RATIO]
FAIL_RATIO = 1e5  # fail outside [1/FAIL_RATIO, FAIL_RATIO]


@dataclass
class GradScaleM:
    layers: list[tuple[str, float]]  # (parameter, RMS of its gradient), shallow to deep
    role: str | None = None  # the repeated role compared, e.g. "h.#.mlp.c_fc.weight"
    roles_compared: int = 0


def role_of(param_name: str) -> str:
    """``h.3.attn.c_attn.weight`` -> ``h.#.attn.c_attn.weight``: the weight's role in its block."""
    return ".".join("#" if part.isdigit() else part for part in param_name.split("."))


class GradScale(Check[GradScaleM]):
    cost = "none (reuses grad-flow's backward)"

    def measure(self, run: Run) -> GradScaleM | Verdict:
        info = run.facts.backward
        modules = dict(run.ctx.model.named_modules())
        by_owner: dict[str, list[tuple[str, torch.Tensor]]] = {}
        for name, grad in info.grads.items():
            module = modules.get(owner(name))
            if grad is None or grad.ndim < 2 or isinstance(module, nn.Embedding | nn.EmbeddingBag):
                continue
            if not bool(grad.any()) or not bool(torch.isfinite(grad).all()):
                continue  # exact zeros and NaNs are grad-flow's and nan-inf's to judge
            by_owner.setdefault(owner(name), []).append((name, grad))
        ordered: list[tuple[str, float]] = []  # every weight, in call order
        for module_name in info.call_order:
            for name, grad in by_owner.pop(module_name, []):
                ordered.append((name, float(grad.float().norm()) / math.sqrt(grad.numel())))
        by_role: dict[str, list[tuple[str, float]]] = {}
        for name, rms in ordered:
            by_role.setdefault(role_of(name), []).append((name, rms))
        repeated = {role: found for role, found in by_role.items() if len(found) >= 2}
        if repeated:
            # the role whose change between its first and last block is the median change
            def change(found: list[tuple[str, float]]) -> float:
                first, last = found[0][1], found[-1][1]
                return math.log(first / last) if first > 0 and last > 0 else math.inf

            ranked = sorted(repeated, key=lambda r: change(repeated[r]))
            role = ranked[(len(ranked) - 1) // 2]
            return GradScaleM(repeated[role], role, len(repeated))
        if len(ordered) < 2:
            return Verdict.not_applicable(
                "fewer than two weight matrices (embeddings aside) received a gradient; no depth "
                "to compare",
                layers=len(ordered),
            )
        return GradScaleM(ordered)

    def judge(self, m: GradScaleM) -> Verdict:
        (first, g_first), (last, g_last) = m.layers[0], m.layers[-1]
        ratio = g_first / g_last if g_last > 0 else math.inf
        smallest = min(m.layers, key=lambda item: item[1])
        evidence: dict[str, object] = {
            "compared": f"role {m.role} across {len(m.layers)} blocks ({m.roles_compared} "
            "repeated roles; the one whose change is the median)"
            if m.role
            else "first and last weight layer in call order",
            "first_layer": first,
            "last_layer": last,
            "rms_grad_first": g_first,
            "rms_grad_last": g_last,
            "ratio_first_to_last": ratio,
            "smallest": f"{smallest[0]} ({smallest[1]:.3g})",
            "layers": len(m.layers),
        }
        what = f"block ({m.role})" if m.role else f"layer of {len(m.layers)}"
        bounds = f"warns outside {1 / WARN_RATIO:g}..{WARN_RATIO:g}, fails outside " + (
            f"{1 / FAIL_RATIO:g}..{FAIL_RATIO:g}"
        )
        if not math.isfinite(ratio) or not 1 / FAIL_RATIO <= ratio <= FAIL_RATIO:
            status = Status.FAIL
        elif not 1 / WARN_RATIO <= ratio <= WARN_RATIO:
            status = Status.WARN
        else:
            return Verdict(
                Status.PASS,
                f"first/last {what} RMS gradient ratio {ratio:.3g} ({bounds})",
                evidence=evidence,
            )
        vanishing = ratio < 1
        return Verdict(
            status,
            f"gradients {'vanish' if vanishing else 'explode'} with depth: first/last {what} "
            f"RMS gradient ratio {ratio:.3g} ({bounds})",
            evidence=evidence,
            where=[first, last],
            causes=(
                [
                    "saturating activations (sigmoid/tanh) stacked deep without normalization",
                    "no residual connections, or weights initialized too small",
                ]
                if vanishing
                else ["weights initialized too large (std >> 1/sqrt(fan_in))", "no normalization"]
            ),
            fix="use ReLU/GELU with He/Kaiming init, add normalization (BatchNorm/LayerNorm) or "
            "residual connections; clip gradients as a stopgap",
        )
