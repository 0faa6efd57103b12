"""TW109 clip-without-unscale (training).

The class docstring is its user documentation (`torchwise rules TW109`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._amp import CLIP
from torchwise.review.rules._loops import (
    position,
    top_level_calls,
)


@rule
class ClipWithoutUnscale(Rule):
    """## What it does
    Flags gradient clipping in a function that scales the loss with a
    `GradScaler` but does not call `scaler.unscale_(optimizer)` before clipping.

    ## Why is this bad?
    With a `GradScaler` the gradients are multiplied by the loss scale (65536
    by default). Clipping them at `max_norm=1.0` clips the *scaled* norm, so
    the real gradients are shrunk by orders of magnitude and the model barely
    trains.

    ## Example
    ```python
    import torch

    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    ```

    ## Use instead
    ```python
    import torch

    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    ```
    """

    code = "TW109"
    name = "clip-without-unscale"
    family = "training"
    severity = Severity.ERROR
    message = (
        "gradients are clipped while still scaled by the GradScaler; "
        "call `scaler.unscale_(optimizer)` first"
    )

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._check(function.calls, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._check(top_level_calls(module), ctx)

    def _check(self, calls: list[F.CallEvent], ctx: Context) -> None:
        scales = [c for c in calls if c.method == "scale" and c.receiver_kind == F.SCALER]
        if not scales:
            return
        unscales = [c for c in calls if c.method == "unscale_"]
        for clip in calls:
            name = clip.method or (clip.qualname or "").rsplit(".", 1)[-1]
            if name not in CLIP or clip.receiver in ("accelerator", "fabric", "self"):
                continue
            # Only the paths on which the loss was scaled: `if amp: scale ... else: clip`
            # clips real gradients on the other branch.
            reaching = [
                s
                for s in scales
                if position(s.node) < position(clip.node) and not F.exclusive(s.branch, clip.branch)
            ]
            if not reaching:
                continue
            if all(_unscaled(scale, clip, unscales) for scale in reaching):
                continue
            ctx.report(self, clip.node)


def _unscaled(scale: F.CallEvent, clip: F.CallEvent, unscales: list[F.CallEvent]) -> bool:
    """An `unscale_` between the two that runs whenever both do."""
    for unscale in unscales:
        if not position(scale.node) < position(unscale.node) < position(clip.node):
            continue
        if F.implied(unscale.branch, clip.branch) or F.implied(unscale.branch, scale.branch):
            return True
    return False
