"""TW133 functional-dropout-always-on (modules).

The class docstring is its user documentation (`torchwise rules TW133`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._layers import FUNCTIONAL_DROPOUT
from torchwise.review.rules._util import add_keyword


@rule
class FunctionalDropoutTraining(Rule):
    """## What it does
    Flags `F.dropout(...)` (and `dropout1d/2d/3d`, `alpha_dropout`,
    `feature_alpha_dropout`) in a method of an `nn.Module` without a
    `training=` argument, outside an `if self.training:` guard.

    ## Why is this bad?
    Unlike `nn.Dropout`, the functional form does not know the module's mode:
    `training` defaults to `True`, so dropout stays on after `model.eval()`
    and evaluation results are random and worse.

    ## Example
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def forward(self, x):
            return F.dropout(self.proj(x), p=0.1)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def forward(self, x):
            return F.dropout(self.proj(x), p=0.1, training=self.training)
    ```

    ## Fix safety
    Unsafe: it turns dropout off in eval mode, which changes evaluation
    outputs (to the ones you meant).
    """

    code = "TW133"
    name = "functional-dropout-always-on"
    family = "modules"
    severity = Severity.ERROR
    message = "`{func}` without `training=self.training` stays on in eval mode"
    fix = Applicability.UNSAFE

    call_names = frozenset(FUNCTIONAL_DROPOUT)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in FUNCTIONAL_DROPOUT or not ctx.in_module_class:
            return
        if keyword(node, "training") or has_kwargs_splat(node) or len(node.args) >= 3:
            return
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            return
        for parent in ctx.parents:  # `if self.training:` / `... if self.training else x`
            if isinstance(parent, (ast.If, ast.IfExp)) and "training" in ctx.text(parent.test):
                return
        function = ctx.function
        first = function.node.args.args[0].arg if function and function.node.args.args else ""  # type: ignore[attr-defined]
        fix = None
        if first == "self":
            edit = add_keyword(ctx, node, "training=self.training")
            fix = Fix("Pass `training=self.training`", (edit,), Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, func="F." + qualname.rsplit(".", 1)[-1])
