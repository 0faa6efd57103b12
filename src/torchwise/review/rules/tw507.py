"""TW507 log-of-sigmoid (numerics).

The class docstring is its user documentation (`torchwise rules TW507`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._numerics import SIGMOID, producer
from torchwise.review.rules._numerics_stable import (
    activation_held,
    logged_argument,
    single_argument,
)
from torchwise.review.rules._util import replace, torch_is_imported, underflow_severity


@rule
class LogOfSigmoid(Rule):
    """## What it does
    Flags `torch.log(torch.sigmoid(x))` and `x.sigmoid().log()`, and the log of
    a name that holds a sigmoid (assigned one, returned by a project function,
    the output of a model that ends in one); not one made safe first
    (`p + 1e-8`, `p.clamp(min=1e-8)`).

    ## Why is this bad?
    `sigmoid(x)` rounds to exactly 0 for `x` below about -88 in float32 (-17
    in float16), and the log of it is `-inf`. `F.logsigmoid` computes
    `-softplus(-x)`, which is exact for every `x`.

    A warning in a file that computes in half precision (`autocast`, a
    `GradScaler`, `.half()`, `float16`), where the underflow starts at a
    logit gap of about 17; elsewhere a hint (`info`): in float32 it takes a
    gap near 100.

    ## Example
    ```python
    import torch

    log_p = torch.log(torch.sigmoid(scores))
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    log_p = F.logsigmoid(scores)
    ```

    ## Fix safety
    Safe: the same function without the underflow. Offered when `torch` is
    imported under its own name (the fix writes `torch.nn.functional.logsigmoid`).
    """

    code = "TW507"
    name = "log-of-sigmoid"
    family = "numerics"
    severity = Severity.WARNING
    message = "`log` of a sigmoid underflows to -inf; use `F.logsigmoid`"
    held_message = (
        "`{name}` holds a sigmoid{where}: its `log` underflows to -inf; "
        "use `F.logsigmoid` on the logits"
    )
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        inner = logged_argument(node, ctx)
        if inner is None:
            return
        held = activation_held(inner, node, ctx)
        if held is not None and held[0] == SIGMOID:
            where = f" (line {held[1]})" if held[1] is not None else ""
            ctx.report(
                self,
                node,
                severity=underflow_severity(ctx),
                message=self.held_message,
                name=ctx.text(inner),
                where=where,
            )
            return
        if not isinstance(inner, ast.Call) or producer(inner, ctx) != SIGMOID:
            return
        argument: ast.expr | None = None
        if isinstance(inner.func, ast.Attribute) and ctx.qualname(inner.func) is None:
            argument = None if inner.args or inner.keywords else inner.func.value
        elif not isinstance(inner.func, ast.Call):
            argument = single_argument(inner)
        fix = None
        if argument is not None and torch_is_imported(ctx):
            text = f"torch.nn.functional.logsigmoid({ctx.text(argument)})"
            fix = Fix("Use `F.logsigmoid`", (replace(ctx, node, text),), Applicability.SAFE)
        ctx.report(self, node, fix=fix, severity=underflow_severity(ctx))
