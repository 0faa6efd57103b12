"""TW503 log-one-plus (numerics).

The class docstring is its user documentation (`torchwise rules TW503`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._numerics_stable import EXPS, LOGS, is_one, single_argument
from torchwise.review.rules._util import rename_attribute, replace


@rule
class LogOnePlus(Rule):
    """## What it does
    Flags `torch.log(1 + x)` (also `math.log`, `np.log`, and `x + 1`). Off by
    default: it matters only when `x` can be tiny.

    ## Why is this bad?
    For `|x|` below the float epsilon (about 1e-7 in float32), `1 + x` rounds
    to exactly 1 and the result to 0: `log1p(x)` keeps every digit. When `x`
    is itself `exp(z)`, `log(1 + exp(z))` also overflows to `inf` for `z`
    above about 88: that is `F.softplus(z)`.

    ## Example
    ```python
    import torch

    y = torch.log(1 + rates)
    ```

    ## Use instead
    ```python
    import torch

    y = torch.log1p(rates)
    ```

    ## Fix safety
    Unsafe: `log1p` is the same function with less rounding, so results
    change in the last bits, which exact-value tests notice. No fix is offered
    for the `softplus` case.
    """

    code = "TW503"
    name = "log-one-plus"
    family = "numerics"
    severity = Severity.INFO
    default_enabled = False
    message = "`{callee}(1 + x)` loses precision for small x; use `{better}`"
    fix = Applicability.UNSAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in LOGS:
            return
        argument = single_argument(node)
        if not isinstance(argument, ast.BinOp) or not isinstance(argument.op, ast.Add):
            return
        if is_one(argument.left):
            other = argument.right
        elif is_one(argument.right):
            other = argument.left
        else:
            return
        module = qualname.rsplit(".", 1)[0]
        if isinstance(other, ast.Call) and ctx.call_name(other) in EXPS:
            better = "F.softplus(x)" if module == "torch" else f"{module}.log1p({module}.exp(x))"
            if module == "torch":
                ctx.report(self, node, callee=qualname, better=better)
            return  # math/numpy: log1p(exp(x)) still overflows; nothing better to offer
        fix = None
        if isinstance(node.func, ast.Attribute):
            edits = (
                rename_attribute(ctx, node.func, "log1p"),
                replace(ctx, argument, ctx.text(other)),
            )
            fix = Fix("Use `log1p`", edits, Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, callee=qualname, better=f"{module}.log1p(x)")
