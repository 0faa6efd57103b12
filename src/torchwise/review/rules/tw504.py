"""TW504 exp-minus-one (numerics).

The class docstring is its user documentation (`torchwise rules TW504`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._numerics_stable import EXPS, is_one, single_argument
from torchwise.review.rules._util import rename_attribute


@rule
class ExpMinusOne(Rule):
    """## What it does
    Flags `torch.exp(x) - 1` (also `math.exp`, `np.exp`). Off by default: it
    matters only when `x` can be tiny.

    ## Why is this bad?
    For small `|x|`, `exp(x)` is close to 1 and the subtraction cancels most
    significant digits (catastrophic cancellation); `expm1(x)` is accurate.

    ## Example
    ```python
    import torch

    y = torch.exp(x) - 1
    ```

    ## Use instead
    ```python
    import torch

    y = torch.expm1(x)
    ```

    ## Fix safety
    Unsafe: `expm1` is the same function with less rounding, so results
    change in the last bits, which exact-value tests notice.
    """

    code = "TW504"
    name = "exp-minus-one"
    family = "numerics"
    severity = Severity.INFO
    default_enabled = False
    message = "`{callee}(x) - 1` cancels digits for small x; use `{module}.expm1(x)`"
    fix = Applicability.UNSAFE

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> None:
        call = node.left
        if not isinstance(node.op, ast.Sub) or not is_one(node.right):
            return
        if not isinstance(call, ast.Call) or ctx.call_name(call) not in EXPS:
            return
        if single_argument(call) is None:
            return
        qualname = ctx.call_name(call) or ""
        fix = None
        if isinstance(call.func, ast.Attribute):
            end = ctx.span(node)[1]
            edits = (rename_attribute(ctx, call.func, "expm1"), Edit(ctx.span(call)[1], end, ""))
            fix = Fix("Use `expm1`", edits, Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, callee=qualname, module=qualname.rsplit(".", 1)[0])
