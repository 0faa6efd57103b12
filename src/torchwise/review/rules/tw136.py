"""TW136 layer-created-in-forward (modules).

The class docstring is its user documentation (`torchwise rules TW136`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._layers import PARAMETRIZED_LAYERS
from torchwise.review.rules._modules import creates_module, self_attribute


@rule
class LayerCreatedInForward(Rule):
    """## What it does
    Flags an `nn.Parameter` or a layer with weights (`nn.Linear`, `nn.Conv2d`,
    `nn.LayerNorm`, ...) constructed inside `forward`, outside an `if` (the
    lazy-initialisation pattern) and not stored on `self`.

    ## Why is this bad?
    A layer built in `forward` gets fresh random weights on every call, and
    neither it nor a parameter made there is in `model.parameters()` when the
    optimizer is built: the output is noise and nothing learns.

    ## Example
    ```python
    from torch import nn

    class Head(nn.Module):
        def forward(self, x):
            return nn.Linear(x.shape[-1], 10)(x)
    ```

    ## Use instead
    ```python
    from torch import nn

    class Head(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, 10)

        def forward(self, x):
            return self.proj(x)
    ```
    """

    code = "TW136"
    name = "layer-created-in-forward"
    family = "modules"
    severity = Severity.ERROR
    impact = "results"
    message = "`{layer}` created in `forward` is re-initialised every call and never trained"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not ctx.in_forward:
            return
        qualname = ctx.call_name(node)
        kind = creates_module(ctx, node)
        if kind != "parameter" and qualname not in PARAMETRIZED_LAYERS:
            return
        grad = keyword(node, "requires_grad")
        if grad is not None and isinstance(grad.value, ast.Constant) and grad.value.value is False:
            return  # a constant on purpose (`nn.Parameter(pe, requires_grad=False)`)
        parents = ctx.parents
        if any(isinstance(parent, (ast.If, ast.IfExp, ast.Try)) for parent in parents):
            return  # lazy initialisation: `if self.proj is None: self.proj = nn.Linear(...)`
        statement = parents[-1] if parents else None
        if isinstance(statement, ast.Assign) and any(
            self_attribute(target) for target in statement.targets
        ):
            return
        ctx.report(self, node, layer="nn." + (qualname or "").rsplit(".", 1)[-1])
