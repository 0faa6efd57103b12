"""TW151 clip-inside-accumulation (training).

The class docstring is its user documentation (`torchwise rules TW151`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._accumulation import CLIPPERS, accumulation


@rule
class ClipInsideAccumulation(Rule):
    """## What it does
    Flags gradient clipping (`clip_grad_norm_`, `clip_grad_value_`) that runs
    on every micro-batch of a gradient-accumulation loop, while the optimizer
    steps only every N batches.

    ## Why is this bad?
    Each clip rescales the partial sum in `.grad` so far, and the next
    micro-batches add to the clipped sum: the gradient the step applies is
    neither the clipped total nor the total, and depends on the order of the
    micro-batches. Clipping is meant for the accumulated gradient, once,
    just before the step.

    ## Example
    ```python
    import torch

    for i, (x, y) in enumerate(loader):
        (criterion(model(x), y) / accumulation_steps).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    import torch

    for i, (x, y) in enumerate(loader):
        (criterion(model(x), y) / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
    ```
    """

    code = "TW151"
    name = "clip-inside-accumulation"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "gradients are clipped on every micro-batch but the optimizer steps only when `{guard}`: "
        "each clip rescales a partial sum that the next micro-batches add to; clip once, "
        "before the step"
    )

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        found = accumulation(loop)
        if found is None:
            return
        for call in loop.calls:
            if call.qualname in CLIPPERS and found.every_batch(call):
                ctx.report(self, call.node, guard=found.guard)
                return
