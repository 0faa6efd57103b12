"""TW505 division-by-norm-without-eps (numerics).

The class docstring is its user documentation (`torchwise rules TW505`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._numerics_stable import NORMS, statistic_of


@rule
class DivisionByNorm(Rule):
    """## What it does
    Flags division by a norm or a standard deviation computed in place, with
    no epsilon: `x / x.norm(dim=-1, keepdim=True)`, `(x - x.mean()) / x.std()`.
    Off by default: it is a robustness hint.

    ## Why is this bad?
    An all-zero row (padding, a dead feature) has norm 0, and a constant
    batch has standard deviation 0 (a batch of one has NaN with the default
    correction): the division yields `inf`/`NaN`, which then spreads through
    the whole model. `F.normalize` clamps the norm; add an epsilon to a std.

    ## Example
    ```python
    import torch

    unit = x / x.norm(dim=-1, keepdim=True)
    z = (adv - adv.mean()) / adv.std()
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    unit = F.normalize(x, dim=-1)
    z = (adv - adv.mean()) / (adv.std() + 1e-8)
    ```
    """

    code = "TW505"
    name = "division-by-norm-without-eps"
    family = "numerics"
    severity = Severity.INFO
    default_enabled = False
    message = "division by a {statistic} with no epsilon gives inf/NaN when it is zero"

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> None:
        if isinstance(node.op, ast.Div):
            self._check(node, node.right, ctx)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        if isinstance(node.op, ast.Div):
            self._check(node, node.value, ctx)

    def _check(self, node: ast.AST, divisor: ast.expr, ctx: Context) -> None:
        statistic = statistic_of(divisor, ctx, {"norm", "std"}, NORMS)
        if statistic is not None:
            shown = "standard deviation" if statistic == "std" else "norm"
            ctx.report(self, node, statistic=shown)
