"""TW107 method-not-called (training).

The class docstring is its user documentation (`torchwise rules TW107`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._training import NO_OP_METHODS


@rule
class MethodNotCalled(Rule):
    """## What it does
    Flags `model.eval`, `model.train`, `optimizer.zero_grad`,
    `loss.backward` and `optimizer.step` written as statements without
    parentheses.

    ## Why is this bad?
    The statement only looks the method up and throws it away: nothing
    happens. The model stays in training mode, gradients are not computed or
    not applied, and Python says nothing.

    ## Example
    ```python
    model.eval
    optimizer.zero_grad
    ```

    ## Use instead
    ```python
    model.eval()
    optimizer.zero_grad()
    ```

    ## Fix safety
    Safe: a bare attribute statement has no effect, so calling the method is
    the only thing it can have meant.
    """

    code = "TW107"
    name = "method-not-called"
    family = "training"
    severity = Severity.ERROR
    message = "`{text}` without parentheses does nothing; call it: `{text}()`"
    fix = Applicability.SAFE

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> None:
        value = node.value
        if not (isinstance(value, ast.Attribute) and value.attr in NO_OP_METHODS):
            return
        if ctx.dotted(value.value) is None and not isinstance(value.value, ast.Call):
            return
        end = ctx.span(value)[1]
        fix = Fix(f"Call `{value.attr}()`", (Edit(end, end, "()"),), Applicability.SAFE)
        ctx.report(self, value, fix=fix, text=ctx.text(value))
