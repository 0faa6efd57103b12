"""TW103 scheduler-step-before-optimizer (training).

The class docstring is its user documentation (`torchwise rules TW103`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    innermost_loop_is,
    is_optimizer_step,
    is_scheduler_step,
    position,
)


@rule
class SchedulerBeforeOptimizer(Rule):
    """## What it does
    Flags `scheduler.step()` called before `optimizer.step()` in the same
    iteration of a loop.

    ## Why is this bad?
    Since PyTorch 1.1 the scheduler must step *after* the optimizer. Stepping it
    first skips the first value of the learning-rate schedule (warm-up starts
    one step late, step decays happen one epoch early) and PyTorch warns.

    ## Example
    ```python
    for epoch in range(10):
        scheduler.step()
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        scheduler.step()
    ```
    """

    code = "TW103"
    name = "scheduler-step-before-optimizer"
    family = "training"
    severity = Severity.WARNING
    message = "`{scheduler}.step()` runs before `optimizer.step()` in the same iteration"

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        direct = [c for c in loop.calls if innermost_loop_is(loop, c)]
        scheduler = next((c for c in direct if is_scheduler_step(c)), None)
        if scheduler is None:
            return
        steps = [c for c in loop.calls if is_optimizer_step(c)]
        if steps and min(position(c.node) for c in steps) > position(scheduler.node):
            ctx.report(self, scheduler.node, scheduler=scheduler.receiver or "scheduler")
