"""TW123 unconditional-break-in-training-loop (training).

The class docstring is its user documentation (`torchwise rules TW123`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import is_optimizer_step, is_tensor_backward


@rule
class UnconditionalBreakInTrainingLoop(Rule):
    """## What it does
    Flags a `break` that sits directly in the body of a `for` loop over data
    that trains (calls `backward()` and steps an optimizer), outside any `if`.

    ## Why is this bad?
    The loop stops after its first batch: each "epoch" trains on one batch, and
    the rest of the data is never seen. It is almost always a debugging line
    left behind, and the loss curves look plausible enough to hide it.

    ## Example
    ```python
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
            break
    ```

    ## Use instead
    ```python
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    ```
    """

    code = "TW123"
    name = "unconditional-break-in-training-loop"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = "this `break` ends the training loop after its first batch"

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        node = loop.node
        if not isinstance(node, (ast.For, ast.AsyncFor)) or _is_counter(node.iter):
            return
        direct = [call for call in loop.calls if call.loop_depth == _depth(loop)]
        if not any(is_tensor_backward(c) for c in direct) or not any(
            is_optimizer_step(c) for c in direct
        ):
            return
        for statement in node.body:  # the loop's own statements, not nested ones
            if isinstance(statement, ast.Break):
                ctx.report(self, statement)


def _depth(loop: F.LoopFacts) -> int:
    depth = 1
    while loop.outer is not None:
        loop, depth = loop.outer, depth + 1
    return depth


def _is_counter(expr: ast.expr) -> bool:
    """``range(n)`` and ``itertools.count()``: a loop over steps, where a final
    ``break`` may be the intended way out."""
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, (ast.Name, ast.Attribute))
        and getattr(expr.func, "id", getattr(expr.func, "attr", "")) in {"range", "count"}
    )
