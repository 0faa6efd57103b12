"""TW126 requires-grad-then-moved (modules).

The class docstring is its user documentation (`torchwise rules TW126`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._modules import creates_module
from torchwise.review.rules._tensor_ops import grad_factory, not_to_cpu
from torchwise.review.rules._tensors import (
    MOVES,
    chained_method,
    move_into_factory,
    move_target,
)


@rule
class RequiresGradThenMoved(Rule):
    """## What it does
    Flags a tensor created with `requires_grad=True` and then moved or
    converted (`.to(device)`, `.cuda()`, `.double()`), chained on the creation
    call or by reassigning the name (`w = w.to(device)`).

    ## Why is this bad?
    The move is an autograd operation: its result is a *non-leaf* tensor, so
    after `backward()` its `.grad` stays `None` (the gradient lands on the
    unreachable CPU original), and an optimizer given it never updates it.

    ## Example
    ```python
    import torch

    w = torch.randn(10, 10, requires_grad=True).to(device)
    ```

    ## Use instead
    ```python
    import torch

    w = torch.randn(10, 10, device=device, requires_grad=True)
    ```

    ## Fix safety
    Unsafe: creating the tensor on the device makes it the leaf you meant, but
    random factories draw different numbers on another device's generator.
    """

    code = "TW126"
    name = "requires-grad-then-moved"
    family = "modules"
    severity = Severity.INFO
    impact = "crash"
    message = "`.{move}()` makes this `requires_grad` tensor a non-leaf: its `.grad` stays None"
    fix = Applicability.UNSAFE

    def __init__(self) -> None:
        self.leaves: list[set[str]] = [set()]  # per function: names holding such tensors

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> None:
        self.leaves.append(set())

    visit_AsyncFunctionDef = visit_FunctionDef

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self.leaves.pop()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        value, leaves = node.value, self.leaves[-1]
        names = [dotted for t in node.targets if (dotted := ctx.dotted(t)) is not None]
        if isinstance(value, ast.Call) and grad_factory(ctx, value):
            leaves.update(names)
            return
        # `w = w.to(device)`: the name now holds the non-leaf copy.
        func = value.func if isinstance(value, ast.Call) else None
        if isinstance(value, ast.Call) and isinstance(func, ast.Attribute) and func.attr in MOVES:
            moved = ctx.dotted(func.value)
            if moved in leaves and moved in names and not_to_cpu(value):
                ctx.report(self, value, move=func.attr)
        leaves.difference_update(names)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not grad_factory(ctx, node):
            return
        move = chained_method(ctx, node)
        if move is None or not isinstance(move.func, ast.Attribute) or move.func.attr not in MOVES:
            return
        if not not_to_cpu(move):
            return
        parents = ctx.parents
        wrapper = parents[-3] if len(parents) >= 3 else None
        if isinstance(wrapper, ast.Call) and creates_module(ctx, wrapper) == "parameter":
            return  # nn.Parameter(...) makes a new leaf
        device = move_target(ctx, move)
        fix = None
        if device is not None:
            fix = move_into_factory(ctx, node, move, device, Applicability.UNSAFE)
        ctx.report(self, move, fix=fix, move=move.func.attr)
