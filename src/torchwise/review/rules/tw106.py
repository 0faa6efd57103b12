"""TW106 loss-accumulated-with-graph (training).

The class docstring is its user documentation (`torchwise rules TW106`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    is_backward,
    is_optimizer_step,
    is_tensor_backward,
)


@rule
class LossAccumulatedWithGraph(Rule):
    """## What it does
    Flags a loss or model output accumulated across the iterations of a
    training loop (one that calls `backward()` or steps an optimizer) with its
    autograd graph attached: `total += loss`, `losses.append(loss)`,
    `outputs.append(model(x))` (outside `torch.no_grad()`).

    ## Why is this bad?
    Each iteration's graph (every activation saved for backward) stays alive
    through the accumulator. Memory grows every step until the process runs
    out of memory, typically hours into training.

    ## Example
    ```python
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        total += loss
    ```

    ## Use instead
    ```python
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        total += loss.item()  # or loss.detach()
    ```
    Accumulating on purpose to call `backward()` on the total once is fine,
    and is not flagged.
    """

    code = "TW106"
    name = "loss-accumulated-with-graph"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    impact = "crash"
    message = (
        "`{target}` accumulates `{value}` with its autograd graph across iterations; "
        "use `.item()` or `.detach()`"
    )

    call_methods = frozenset({"append"})

    def __init__(self) -> None:
        # (function node or None, name) -> loop depth of its last plain assignment
        self.assigned_at: dict[tuple[int, str], int] = {}
        # (statement, target, value text, function id, the loop it runs in)
        self.candidates: list[tuple[ast.AST, str, str, int, F.LoopFacts]] = []

    def _key(self, ctx: Context, name: str) -> tuple[int, str]:
        return (id(ctx.function) if ctx.function else 0, name)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        for target in node.targets:
            name = ctx.dotted(target)
            if name is not None:
                self.assigned_at[self._key(ctx, name)] = len(ctx.loops)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        if isinstance(node.op, ast.Add):
            self._candidate(node, node.target, node.value, ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "append"):
            return
        if len(node.args) == 1 and isinstance(ctx.parent, ast.Expr):
            self._candidate(node, func.value, node.args[0], ctx)

    def _candidate(self, node: ast.AST, target: ast.expr, value: ast.expr, ctx: Context) -> None:
        if not ctx.loops or ctx.in_no_grad:
            return
        name = ctx.dotted(target)
        if name is None or ctx.kind_of(value) not in (F.LOSS, F.OUTPUT):
            return
        if re.search(rf"\b{re.escape(name)}\b", ctx.text(value)):
            return  # `total += total / n` rescales the accumulator: no new graph joins it
        depth = self.assigned_at.get(self._key(ctx, name))
        if depth is not None and depth >= len(ctx.loops):
            return  # reset inside this iteration: a per-step sum, not an accumulator
        function_id = id(ctx.function) if ctx.function else 0
        self.candidates.append((node, name, ctx.text(value), function_id, ctx.loops[-1]))

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._judge(function.calls, id(function), function.node, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._judge(module.calls, 0, module.node, ctx)

    def _judge(
        self, calls: list[F.CallEvent], function_id: int, scope: ast.AST, ctx: Context
    ) -> None:
        backward_texts = _backward_texts(calls, scope, ctx)
        for node, target, value, owner, loop in self.candidates:
            if owner != function_id:
                continue
            if not any(is_tensor_backward(c) or is_optimizer_step(c) for c in loop.calls):
                continue  # not a training loop: e.g. terms summed inside a loss function
            if any(re.search(rf"\b{re.escape(target)}\b", text) for text in backward_texts):
                continue  # accumulated to backward through the total: intended
            ctx.report(self, node, target=target, value=value)


def _backward_texts(calls: list[F.CallEvent], scope: ast.AST, ctx: Context) -> list[str]:
    """The text of each ``backward`` call in the scope, with what its loss
    was assigned from there (``loss_q = torch.stack(losses).sum()`` before
    ``loss_q.backward()``): a total backpropagated through a name of its own."""
    backwards = [c for c in calls if is_backward(c)]
    texts = [ctx.text(c.node) for c in backwards]
    receivers = {
        c.node.func.value.id
        for c in backwards
        if isinstance(c.node.func, ast.Attribute) and isinstance(c.node.func.value, ast.Name)
    }
    if receivers:
        for node in subtree(scope):
            if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id in receivers for target in node.targets
            ):
                texts.append(ctx.text(node.value))
    return texts
