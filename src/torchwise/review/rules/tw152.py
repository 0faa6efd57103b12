"""TW152 zero-grad-inside-accumulation (training).

The class docstring is its user documentation (`torchwise rules TW152`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._accumulation import accumulation


@rule
class ZeroGradInsideAccumulation(Rule):
    """## What it does
    Flags `zero_grad()` that runs on every micro-batch of a
    gradient-accumulation loop, while the optimizer steps only every N
    batches.

    ## Why is this bad?
    Each micro-batch starts by clearing the gradients the previous ones
    accumulated: the step applies the gradient of the last micro-batch
    only, so the accumulation the loop is written for never happens (the
    effective batch is one micro-batch, and N-1 backward passes of every N
    are wasted).

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        (criterion(model(x), y) / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
    ```

    ## Use instead
    ```python
    for i, (x, y) in enumerate(loader):
        (criterion(model(x), y) / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```
    """

    code = "TW152"
    name = "zero-grad-inside-accumulation"
    family = "training"
    severity = Severity.ERROR
    in_test_modules = False
    message = (
        "`zero_grad()` runs on every micro-batch but the optimizer steps only when `{guard}`: "
        "each step applies the last micro-batch's gradient only; clear the gradients after "
        "the step"
    )

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        found = accumulation(loop)
        if found is None:
            return
        for call in loop.calls:
            if E.is_zero_grad(call) and found.every_batch(call):
                ctx.report(self, call.node, guard=found.guard)
                return
