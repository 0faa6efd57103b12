"""TW102 zero-grad-before-step (training).

The class docstring is its user documentation (`torchwise rules TW102`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    is_optimizer_step,
    is_tensor_backward,
    is_zero_grad,
    loop_depth,
    position,
    top_level_calls,
)
from torchwise.review.rules._training import same_optimizer


@rule
class ZeroGradBeforeStep(Rule):
    """## What it does
    Flags `zero_grad()` called after `backward()` and before the
    `optimizer.step()` that should use those gradients.

    ## Why is this bad?
    The step then sees zero gradients: the model never learns (with weight
    decay or momentum it even drifts). Nothing errors.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    ```
    """

    code = "TW102"
    name = "zero-grad-before-step"
    family = "training"
    severity = Severity.ERROR
    message = "`zero_grad()` between `backward()` and `{step}`: the step sees zero gradients"

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._check(function.calls, function.loops, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        # The module's own statements: each function's calls were judged on leaving it.
        top = [c for c in top_level_calls(module) if c.loop_depth]
        self._check(top, [loop for loop in module.loops if loop.function is None], ctx)

    def _check(self, calls: list[F.CallEvent], loops: list[F.LoopFacts], ctx: Context) -> None:
        relevant = sorted(
            (c for c in calls if is_tensor_backward(c) or is_zero_grad(c) or is_optimizer_step(c)),
            key=lambda c: position(c.node),
        )
        if not any(is_zero_grad(c) for c in relevant):
            return
        # Each call's innermost loop, found once: the calls of one region in order.
        deepest: dict[int, tuple[int, int]] = {}  # id(call) -> (depth, id(loop))
        for loop in loops:
            depth = loop_depth(loop)
            for call in loop.calls:
                known = deepest.get(id(call))
                if known is None or known[0] < depth:
                    deepest[id(call)] = (depth, id(loop))
        regions: dict[int, list[F.CallEvent]] = {}
        for call in relevant:
            regions.setdefault(deepest.get(id(call), (0, 0))[1], []).append(call)
        for same in regions.values():
            self._check_region(same, ctx)

    def _check_region(self, same: list[F.CallEvent], ctx: Context) -> None:
        for index, zero in enumerate(same):
            if not is_zero_grad(zero):
                continue
            before, after = same[:index], same[index + 1 :]
            # the last thing before it is a backward, the next is a matching step
            if not before or not is_tensor_backward(before[-1]):
                continue
            step = next((c for c in after if not is_zero_grad(c)), None)
            if step is None or not is_optimizer_step(step):
                continue
            if not same_optimizer(zero, step):
                continue
            ctx.report(self, zero.node, step=f"{step.receiver or 'optimizer'}.step()")
