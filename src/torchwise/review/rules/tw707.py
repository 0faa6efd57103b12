"""TW707 loss-target-with-graph (tensors).

The class docstring is its user documentation (`torchwise rules TW707`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.facts import Value
from torchwise.review.engine.tracking import UNPACKED
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._devices import LOSS_FUNCTIONS

_GRAPH_KINDS = (F.OUTPUT, F.TENSOR, F.LOSS)
#: Losses whose target is a tensor of values (class indices cannot carry a graph).
_VALUE_TARGET_LOSSES = frozenset(
    {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
     "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_embedding_loss"}
)  # fmt: skip
#: Losses whose two arguments play the same part: a graph-free first argument
#: means the two were written the other way round, which changes nothing.
_SYMMETRIC = frozenset(
    {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "MSELoss", "L1Loss",
     "SmoothL1Loss", "HuberLoss"}
)  # fmt: skip
_VALUE_TARGET_MODULES = frozenset(
    {"MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "BCELoss",
     "BCEWithLogitsLoss", "CosineEmbeddingLoss"}
)  # fmt: skip


@rule
class LossTargetWithGraph(Rule):
    """## What it does
    Flags a loss whose target (its second argument) is computed by a model
    with autograd on and not detached: outside `torch.no_grad()` and without
    `.detach()`. An error when the target comes from the model being trained
    (a TD target from the Q-network itself), a warning when it comes from
    another model (a target network, a teacher). A symmetric loss between two
    outputs of models as they come (`mse_loss(vgg(real), vgg(fake))`, a
    perceptual or feature-matching loss) is not flagged.

    ## Why is this bad?
    Backward then runs through the target as well. From the same model, the
    gradient is not the one the method prescribes (a DQN or TD target must be
    a constant: semi-gradient, not residual-gradient), and the model learns
    something else. From another model, gradients accumulate in its
    parameters for nothing (memory and time), and reach them for good if an
    optimizer steps that model too.

    ## Example
    ```python
    import torch
    import torch.nn.functional as F
    from torch import nn

    q_net = nn.Linear(4, 2)

    def td_loss(states, actions, rewards, next_states):
        q = q_net(states).gather(1, actions)
        target = rewards + 0.99 * q_net(next_states).max(1, keepdim=True)[0]
        return F.smooth_l1_loss(q, target)
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn.functional as F
    from torch import nn

    q_net = nn.Linear(4, 2)

    def td_loss(states, actions, rewards, next_states):
        q = q_net(states).gather(1, actions)
        with torch.no_grad():
            target = rewards + 0.99 * q_net(next_states).max(1, keepdim=True)[0]
        return F.smooth_l1_loss(q, target)
    ```
    """

    code = "TW707"
    name = "loss-target-with-graph"
    family = "tensors"
    severity = Severity.ERROR
    impact = "results"
    message = (
        "the target `{target}` is computed by `{models}` with autograd on: backward runs "
        "through it too ({effect}); compute it under `torch.no_grad()` or `.detach()` it"
    )

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if len(node.args) < 2 or ctx.in_no_grad:
            return
        qualname = ctx.call_name(node) or ""
        loss = qualname.rsplit(".", 1)[-1]
        if qualname in LOSS_FUNCTIONS:
            if loss not in _VALUE_TARGET_LOSSES:
                return
        else:
            func = node.func
            if not isinstance(func, (ast.Name, ast.Attribute)):
                return
            callee = ctx.value_of(func)
            if callee is None or callee.kind != F.LOSS_FN:
                return
            loss = (callee.origin or "").rsplit(".", 1)[-1]
            if loss not in _VALUE_TARGET_MODULES:
                return
        prediction, target = ctx.value_of(node.args[0]), ctx.value_of(node.args[1])
        if target is None or target.kind not in _GRAPH_KINDS or not target.through:
            return
        if UNPACKED in target.flags:
            return  # an element of a model's tuple output: maybe lengths or indices
        if loss in _SYMMETRIC and (prediction is None or not prediction.through):
            return  # `mse_loss(td_target, q)`: the arguments swapped, the same loss
        if loss in _SYMMETRIC and prediction is not None and _feature_match(prediction, target):
            return  # `mse_loss(vgg(real), vgg(fake))`: a perceptual loss on two outputs
        trained = set() if prediction is None else set(prediction.through)
        shared = sorted(trained & set(target.through))
        models = ", ".join(f"`{name}`" for name in sorted(target.through))
        if shared:
            effect = "the gradient is not the one the method prescribes"
            ctx.report(
                self, node, target=ctx.text(node.args[1]), models=models.strip("`"), effect=effect
            )
        else:
            effect = "its gradients accumulate in that model for nothing"
            ctx.report(
                self,
                node,
                target=ctx.text(node.args[1]),
                models=models.strip("`"),
                effect=effect,
                severity=Severity.WARNING,
            )


def _feature_match(prediction: Value, target: Value) -> bool:
    """Both sides are a model's outputs as they come (not a TD target computed from
    one): a perceptual or feature-matching loss, whose two sides carry graphs on
    purpose."""
    return prediction.kind == F.OUTPUT and target.kind == F.OUTPUT
