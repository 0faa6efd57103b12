"""TW131 data-attribute (modules).

The class docstring is its user documentation (`torchwise rules TW131`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._forward import TensorNames, param_like
from torchwise.review.rules._tensor_ops import writes_data


@rule
class DataAttribute(TensorNames, Rule):
    """## What it does
    Inside `forward` or a loss function, flags `.data` on a parameter
    (`self.weight.data`) or on a tensor computed there.

    ## Why is this bad?
    `.data` returns the same storage with autograd detached, and without the
    version-counter checks that `.detach()` keeps: whatever is computed from
    it gets no gradient, so the parameter silently stops training, and an
    in-place change to it corrupts gradients without an error. Outside the
    graph (weight initialisation under `torch.no_grad()`) it is legacy style
    but harmless, and not flagged.

    ## Example
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Scaled(nn.Linear):
        def forward(self, x):
            return F.linear(x, self.weight.data * 2)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Scaled(nn.Linear):
        def forward(self, x):
            return F.linear(x, self.weight * 2)
    ```
    """

    code = "TW131"
    name = "data-attribute"
    family = "modules"
    severity = Severity.INFO
    message = "`{base}.data` in {where} bypasses autograd: use the tensor (or `.detach()`)"

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        if node.attr != "data" or not isinstance(node.ctx, ast.Load):
            return
        role = self.role
        if role is None or ctx.in_no_grad:
            return
        base = node.value
        if not (param_like(base) or self.is_tensor(ctx, base)):
            return
        parents = ctx.parents
        parent = parents[-1] if parents else None
        if isinstance(parent, ast.Attribute) and parent.attr in {"detach", "clone", "copy_"}:
            return  # `.data.detach()`: detached on purpose
        if any(isinstance(p, ast.Assign) and writes_data(p) for p in parents):
            return  # `new.weight.data[:n] = old.weight.data`: weight surgery, not math
        where = "`forward`" if role == "forward" else "a loss function"
        ctx.report(self, node, base=ctx.text(base), where=where)
