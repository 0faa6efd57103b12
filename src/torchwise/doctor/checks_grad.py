"""Gradient checks: grad-flow, param-update, grad-scale.

grad-flow and grad-scale share one train-mode forward and backward (cached on the
context); param-update takes one real Adam step, which the runner undoes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from torchwise.doctor.context import Context, backward, primary_output, tensors_in
from torchwise.doctor.registry import register, result
from torchwise.doctor.report import CheckResult, Status


@dataclass
class BackwardInfo:
    """What one forward + backward in train mode produced."""

    loss: float
    grads: dict[str, torch.Tensor | None]
    #: leaf-ish modules that own parameters, in the order forward first called them
    call_order: list[str] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)
    error: str | None = None
    #: parameters that reach only outputs other than the one the loss uses (BERT's pooler)
    secondary_only: set[str] = field(default_factory=set)


def owner(param_name: str) -> str:
    return param_name.rsplit(".", 1)[0] if "." in param_name else ""


def backward_pass(ctx: Context) -> BackwardInfo:
    cached = ctx.cache.get("backward")
    if isinstance(cached, BackwardInfo):
        return cached
    order: list[str] = []
    ran: set[str] = set()
    handles = []
    for name, module in ctx.model.named_modules():

        def pre(mod: nn.Module, args: object, name: str = name) -> None:
            if name not in ran:
                ran.add(name)
                order.append(name)

        handles.append(module.register_forward_pre_hook(pre))
    ctx.zero_grads()
    error = None
    secondary_only: set[str] = set()
    try:
        out, loss = ctx.train_loss()
        primary = primary_output(out)
        others = [
            t
            for t in tensors_in(out)
            if t is not primary and t.requires_grad and t.is_floating_point()
        ]
        if loss.requires_grad:
            loss.backward(retain_graph=bool(others))  # type: ignore[no-untyped-call]
        else:
            error = "the loss does not require grad: the output is detached from every parameter"
        loss_value = float(loss.detach())
        missing = [
            (n, p) for n, p in ctx.model.named_parameters() if p.requires_grad and p.grad is None
        ]
        if others and missing:
            # the loss uses one output; a parameter feeding only the others is not unused
            probe = torch.stack([o.float().sum() for o in others]).sum()
            reached = torch.autograd.grad(probe, [p for _, p in missing], allow_unused=True)
            secondary_only = {
                n for (n, _), g in zip(missing, reached, strict=True) if g is not None
            }
    finally:
        for h in handles:
            h.remove()
    grads = {
        n: (None if p.grad is None else p.grad.detach().clone())
        for n, p in ctx.model.named_parameters()
        if p.requires_grad and n not in secondary_only
    }
    info = BackwardInfo(loss_value, grads, order, ran, error, secondary_only)
    ctx.cache["backward"] = info
    return info


@register("grad-flow", title="every trainable parameter gets a gradient", cost="1 fwd+bwd")
def grad_flow(ctx: Context) -> CheckResult:
    info = backward_pass(ctx)
    if not info.grads:
        return result("grad-flow", Status.SKIP, "the model has no trainable parameters")
    unused: list[str] = []
    detached: list[str] = []
    nonfinite: list[str] = []
    zero: list[str] = []
    for name, grad in info.grads.items():
        if grad is None:
            (detached if owner(name) in info.ran else unused).append(name)
        elif not bool(torch.isfinite(grad).all()):
            nonfinite.append(name)
        elif not bool(grad.any()):
            zero.append(name)
    evidence: dict[str, Any] = {
        "trainable": len(info.grads),
        "with_gradient": len(info.grads) - len(unused) - len(detached),
        "loss": info.loss,
    }
    if info.secondary_only:
        evidence["feed_only_other_outputs"] = sorted(info.secondary_only)
    if unused or detached or nonfinite:
        causes = []
        if unused:
            evidence["never_called"] = sorted({owner(n) for n in unused})
            causes.append(
                "a layer is built in __init__ but never called in forward (leftover, or "
                "forward calls a different attribute)"
            )
        if detached:
            evidence["called_but_no_grad"] = detached
            causes.append(
                "a branch's output is cut from the loss: .detach(), .item()/.numpy(), "
                "torch.no_grad() in forward, or an output that forward discards"
            )
        if nonfinite:
            evidence["non_finite_grad"] = nonfinite
            causes.append("a NaN/inf in forward or backward (see the nan-inf check)")
        if info.error:
            evidence["error"] = info.error
        where = unused + detached + nonfinite
        return result(
            "grad-flow",
            Status.FAIL,
            f"{len(where)} of {len(info.grads)} trainable parameters get no usable gradient",
            evidence=evidence,
            where=where,
            causes=causes,
            fix="call every layer you train and keep its output on the loss path (no detach/"
            "item/no_grad); delete layers you do not use, or freeze them on purpose",
        )
    if zero:
        evidence["all_zero_grad"] = zero
        return result(
            "grad-flow",
            Status.WARN,
            f"{len(zero)} parameters get a gradient of exactly zero on this batch",
            evidence=evidence,
            where=zero,
            causes=[
                "the parameter is multiplied by zero or feeds only dead ReLUs",
                "a mask or gate that is closed for the whole batch",
            ],
            fix="check the dead-units check and the layer's gating; try another batch",
        )
    return result(
        "grad-flow",
        Status.PASS,
        f"all {len(info.grads)} trainable parameters get a finite, non-zero gradient",
        evidence=evidence,
    )


@register("param-update", title="one optimizer step moves every trainable parameter", cost="1 step")
def param_update(ctx: Context) -> CheckResult:
    named = list(ctx.model.named_parameters())
    trainable = [(n, p) for n, p in named if p.requires_grad]
    frozen = [n for n, p in named if not p.requires_grad]
    if not trainable:
        return result(
            "param-update",
            Status.FAIL,
            f"all {len(named)} parameters have requires_grad=False: nothing can train",
            evidence={"frozen": len(frozen)},
            where=sorted({owner(n) or "model" for n in frozen}),
            causes=["requires_grad_(False) / a freezing loop left in from fine-tuning"],
            fix="unfreeze the parameters you mean to train",
        )
    secondary = backward_pass(ctx).secondary_only  # e.g. BERT's pooler: not on the loss path
    before = {n: p.detach().clone() for n, p in named}
    # Adam moves every parameter with a non-zero gradient by about lr, whatever the
    # gradient's scale, so "unchanged" means "no gradient", not "tiny gradient".
    opt = torch.optim.Adam([p for _, p in trainable], lr=1e-3)
    ctx.zero_grads()
    _, loss = ctx.train_loss()
    if loss.requires_grad:
        backward(loss)
    opt.step()
    unchanged = [
        n for n, p in trainable if n not in secondary and torch.equal(before[n], p.detach())
    ]
    moved_frozen = [n for n in frozen if not torch.equal(before[n], dict(named)[n].detach())]
    evidence: dict[str, object] = {
        "trainable": len(trainable),
        "changed": len(trainable) - len(unchanged),
        "frozen": len(frozen),
    }
    if unchanged or moved_frozen:
        evidence["unchanged"] = unchanged
        if moved_frozen:
            evidence["frozen_but_changed"] = moved_frozen
        return result(
            "param-update",
            Status.FAIL,
            f"{len(unchanged)} trainable parameters did not change after a step"
            + (f"; {len(moved_frozen)} frozen ones did" if moved_frozen else ""),
            evidence=evidence,
            where=unchanged + moved_frozen,
            causes=[
                "no gradient reaches them (unused layer, detached branch; see grad-flow)",
                "a frozen parameter written in place in forward (e.g. a manual EMA on "
                "an nn.Parameter instead of a buffer)",
            ],
            fix="keep trained layers on the loss path; keep non-trained state in buffers",
        )
    if frozen:
        modules = sorted({owner(n) or "model" for n in frozen})
        evidence["frozen_modules"] = modules
        return result(
            "param-update",
            Status.WARN,
            f"{len(frozen)} of {len(named)} parameters are frozen (requires_grad=False)",
            evidence=evidence,
            where=modules,
            causes=[
                "a freezing loop (for p in m.parameters(): p.requires_grad = False) that was "
                "meant for a warm-up or for another sub-network",
            ],
            fix="if the freeze is intended, ignore this warning; otherwise set "
            "requires_grad=True on these modules before building the optimizer",
        )
    return result(
        "param-update",
        Status.PASS,
        f"one Adam step changed all {len(trainable)} trainable parameters",
        evidence=evidence,
    )


@register("grad-scale", title="gradients neither vanish nor explode across depth", cost="cached")
def grad_scale(ctx: Context) -> CheckResult:
    info = backward_pass(ctx)
    layers: list[tuple[str, float]] = []  # (module, RMS of its weight gradient), by depth
    by_owner: dict[str, list[torch.Tensor]] = {}
    for name, grad in info.grads.items():
        if grad is not None and grad.ndim >= 2:
            by_owner.setdefault(owner(name), []).append(grad)
    for module in info.call_order:
        for grad in by_owner.pop(module, []):
            # RMS per element, so a 3x3x3x64 conv and a 512x10 head compare fairly
            layers.append((module, float(grad.float().norm()) / math.sqrt(grad.numel())))
    if len(layers) < 2:
        return result(
            "grad-scale",
            Status.SKIP,
            "fewer than two weight matrices received a gradient; no depth to compare",
            evidence={"layers": len(layers)},
        )
    (first, g_first), (last, g_last) = layers[0], layers[-1]
    ratio = g_first / g_last if g_last > 0 else math.inf
    smallest = min(layers, key=lambda item: item[1])
    evidence = {
        "first_layer": first,
        "last_layer": last,
        "rms_grad_first": g_first,
        "rms_grad_last": g_last,
        "ratio_first_to_last": ratio,
        "smallest": f"{smallest[0]} ({smallest[1]:.3g})",
        "layers": len(layers),
    }
    if not math.isfinite(ratio) or ratio < 1e-5 or ratio > 1e5:
        status = Status.FAIL
    elif ratio < 1e-3 or ratio > 1e3:
        status = Status.WARN
    else:
        return result(
            "grad-scale",
            Status.PASS,
            f"first/last layer gradient ratio {ratio:.3g} across {len(layers)} layers",
            evidence=evidence,
        )
    vanishing = ratio < 1
    return result(
        "grad-scale",
        status,
        f"gradients {'vanish' if vanishing else 'explode'} with depth: first/last layer "
        f"RMS gradient ratio {ratio:.3g}",
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
