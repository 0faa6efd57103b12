"""TW108 backward-under-no-grad (training).

The class docstring is its user documentation (`torchwise rules TW108`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule


@rule
class BackwardUnderNoGrad(Rule):
    """## What it does
    Flags `backward()` on a loss computed inside `torch.no_grad()` or
    `torch.inference_mode()` (including functions decorated with them).

    ## Why is this bad?
    Under `no_grad` no graph is recorded, so the loss does not require grad
    and `backward()` raises `element 0 of tensors does not require grad` — or,
    when part of the loss was computed outside, silently skips the rest.

    ## Example
    ```python
    import torch

    @torch.no_grad()
    def train_step(model, x, optimizer):
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    def train_step(model, x, optimizer):
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    ```
    """

    code = "TW108"
    name = "backward-under-no-grad"
    family = "training"
    severity = Severity.ERROR
    impact = "crash"
    message = "`backward()` on a value computed under `{mode}`: no graph was recorded"
    call_methods = frozenset({"backward"})

    def __init__(self) -> None:
        self.computed_without_grad: set[tuple[int, str]] = set()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if not ctx.in_no_grad:
            return
        for target in node.targets:
            name = ctx.dotted(target)
            if name is not None:
                self.computed_without_grad.add((id(ctx.function), name))

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "backward") or not ctx.in_no_grad:
            return
        function = ctx.function
        decorated = function is not None and function.no_grad
        receiver = ctx.dotted(func.value)
        if decorated or (id(function), receiver) in self.computed_without_grad:
            ctx.report(self, node, mode="torch.no_grad()")
