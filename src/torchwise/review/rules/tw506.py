"""TW506 sqrt-of-variance-without-eps (numerics).

The class docstring is its user documentation (`torchwise rules TW506`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._numerics_stable import single_argument, statistic_of


@rule
class SqrtOfVariance(Rule):
    """## What it does
    Flags `torch.sqrt(x.var())` (and `torch.rsqrt`, `x.var().sqrt()`) with no
    epsilon inside. Off by default: it is a robustness hint.

    ## Why is this bad?
    The derivative of `sqrt` at 0 is infinite: when the variance is 0 (a
    constant input, a batch of one) the backward pass produces NaN, and
    `rsqrt` is infinite already in the forward pass. Normalisation layers
    compute `rsqrt(var + eps)` for this reason.

    ## Example
    ```python
    import torch

    scale = torch.sqrt(h.var(dim=-1, keepdim=True))
    ```

    ## Use instead
    ```python
    import torch

    scale = torch.sqrt(h.var(dim=-1, keepdim=True) + 1e-5)
    ```
    """

    code = "TW506"
    name = "sqrt-of-variance-without-eps"
    family = "numerics"
    severity = Severity.INFO
    default_enabled = False
    message = "`{callee}` of a variance with no epsilon: infinite gradient when it is zero"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in {"torch.sqrt", "torch.rsqrt"}:
            argument, callee = single_argument(node), qualname
        elif (
            qualname is None
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"sqrt", "rsqrt"}
            and not node.args
        ):
            argument, callee = node.func.value, f".{node.func.attr}()"
        else:
            return
        if argument is not None and statistic_of(argument, ctx, {"var"}, {"torch.var"}):
            ctx.report(self, node, callee=callee)
