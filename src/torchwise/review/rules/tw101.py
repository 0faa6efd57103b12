"""TW101 missing-zero-grad (training).

The class docstring is its user documentation (`torchwise rules TW101`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    Effects,
    enclosing_loops,
    innermost_loop,
    is_tensor_backward,
    local_callee,
    regions,
)
from torchwise.review.rules._training import loop_calls
from torchwise.review.rules._util import in_test_code


@rule
class MissingZeroGrad(Rule):
    """## What it does
    Flags a training loop that calls `backward()` and `optimizer.step()` but
    never clears the gradients (`optimizer.zero_grad()`, `model.zero_grad()` or
    setting `param.grad = None`).

    ## Why is this bad?
    `backward()` *adds* to `.grad`. Without zeroing, every step uses the sum of
    all gradients so far: the effective learning rate grows with the step count
    and training diverges or stalls, usually without an error.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    Gradient accumulation is fine: zero the gradients after the step that
    consumes them, inside the loop.
    """

    code = "TW101"
    name = "missing-zero-grad"
    family = "training"
    severity = Severity.ERROR
    message = "gradients are never zeroed in this training loop: `.grad` accumulates across steps"

    def __init__(self) -> None:
        self.grad_resets: list[ast.AST] = []  # `p.grad = None` statements

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in node.targets):
            self.grad_resets.append(node)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        effects = Effects(module, ctx)
        for function, loops in regions(module):
            calls = function.calls if function else [c for c in module.calls if c.loop_depth]
            for backward in (c for c in calls if is_tensor_backward(c)):
                if backward.loop_depth == 0 or (function and backward not in loop_calls(loops)):
                    self._check_loopless(backward, function, module, effects, ctx)
                    continue
                step_loop = next(
                    (
                        loop
                        for loop in enclosing_loops(innermost_loop(loops, backward))
                        if effects.region_does(loop.calls, "step")
                    ),
                    None,
                )
                if (
                    step_loop is not None
                    and not self._zeroes(step_loop.calls, step_loop.node, effects)
                    and not _optimises_fresh_tensors(step_loop.node, ctx)
                    and not in_test_code(ctx)
                ):
                    ctx.report(self, backward.node)

    def _check_loopless(
        self,
        backward: F.CallEvent,
        function: F.FunctionFacts | None,
        module: F.ModuleFacts,
        effects: Effects,
        ctx: Context,
    ) -> None:
        """A ``train_step`` function: fine if it or every loop calling it zeroes."""
        if function is None or not effects.region_does(function.calls, "step"):
            return
        if self._zeroes(function.calls, function.node, effects):
            return
        callers = [
            loop
            for _, loops in regions(module)
            for loop in loops
            if any(local_callee(call) == function.name for call in loop.calls)
        ]
        if in_test_code(ctx):
            return
        if callers and not any(self._zeroes(loop.calls, loop.node, effects) for loop in callers):
            ctx.report(self, backward.node)

    def _zeroes(self, calls: list[F.CallEvent], region: ast.AST, effects: Effects) -> bool:
        if effects.region_does(calls, "zero_grad"):
            return True
        first, last = region.lineno, region.end_lineno or region.lineno  # type: ignore[attr-defined]
        return any(first <= node.lineno <= last for node in self.grad_resets)  # type: ignore[attr-defined]


def _optimises_fresh_tensors(loop: ast.AST, ctx: Context) -> bool:
    """The loop builds its optimizer each iteration over tensors it also creates
    there (`x = z.detach().clone()`, `opt = SGD([x])`): nothing carries over."""
    created: set[str] = set()
    for node in subtree(loop):
        if isinstance(node, ast.Assign):
            created.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in subtree(loop):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        name = ctx.call_name(node) or ""
        params = node.args[0]
        if (
            name.startswith("torch.optim.")
            and isinstance(params, ast.List)
            and params.elts
            and all(isinstance(e, ast.Name) and e.id in created for e in params.elts)
        ):
            return True
    return False
