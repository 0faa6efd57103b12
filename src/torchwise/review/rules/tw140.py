"""TW140 factory-without-device (modules).

The class docstring is its user documentation (`torchwise rules TW140`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._forward import TensorNames, operands_of
from torchwise.review.rules._tensors import (
    factory,
    passes_device,
)


@rule
class FactoryWithoutDevice(TensorNames, Rule):
    """## What it does
    Flags `torch.zeros`, `ones`, `empty`, `full`, `arange`, `linspace`, `eye`,
    `rand`, `randn`, `randint` and `torch.tensor([...])` called in `forward`
    without `device=` whose result meets another tensor of the forward in an
    operator (`x + torch.arange(n)`, `torch.arange(n)[None] < lengths[:, None]`).
    `*_like`/`x.new_*` factories, 0-dim tensors, and creations moved straight
    away (see TW206) are not flagged; nor, for precision, are factories stored
    in a name first (they are often moved later).

    ## Why is this bad?
    Without `device=` the tensor is allocated on the CPU (or the default
    device), whatever device the model was moved to: on a GPU the operation
    fails with `Expected all tensors to be on the same device`.

    ## Example
    ```python
    import torch
    from torch import nn

    class Positions(nn.Module):
        def forward(self, x):
            return x + torch.arange(x.shape[1])
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    class Positions(nn.Module):
        def forward(self, x):
            return x + torch.arange(x.shape[1], device=x.device)
    ```
    """

    code = "TW140"
    name = "factory-without-device"
    family = "modules"
    severity = Severity.INFO
    impact = "crash"
    message = "`torch.{name}` in `forward` without `device=` is on the CPU, unlike its operand"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not ctx.in_forward or self.role != "forward":
            return
        name = factory(ctx, node)
        if name is None or passes_device(node) or keyword(node, "out"):
            return
        data = node.args[0] if node.args else None
        if name in {"tensor", "as_tensor"}:
            if not isinstance(data, (ast.List, ast.Tuple, ast.ListComp)):
                return  # a 0-dim scalar combines with tensors on any device
        elif isinstance(data, (ast.List, ast.Tuple)) and not data.elts:
            return  # torch.rand([]): 0-dim
        operands = operands_of(ctx, node)
        if operands and any(self.is_tensor(ctx, other, inputs=True) for other in operands):
            ctx.report(self, node, name=name)
