"""TW706 index-of-reduced-tensor (tensors).

The class docstring is its user documentation (`torchwise rules TW706`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.tensor_values import subscript_items
from torchwise.review.engine.tensors import too_many_indices
from torchwise.review.registry import Rule, rule


@rule
class IndexOfReducedTensor(Rule):
    """## What it does
    Flags indexing a tensor with more indices than it has dimensions, where
    the dimensions are known: a full reduction (`x.sum()`, `x.mean()`,
    `torch.max(x)` without `dim`) is 0-dim, a reduction over one dimension
    drops it, a factory has the sizes it was given. (`loss.data[0]` on a
    loss is TW130's.)

    ## Why is this bad?
    It raises `IndexError: invalid index of a 0-dim tensor` (or `too many
    indices for tensor of dimension 1`). Often it is code from before PyTorch
    0.4, where `torch.max(x)[1]` meant the index of the maximum: today
    `torch.max(x)` without `dim` returns a single value.

    ## Example
    ```python
    import torch

    scores = torch.randn(8, 3)
    best = torch.max(scores)[1]
    ```

    ## Use instead
    ```python
    import torch

    scores = torch.randn(8, 3)
    best = torch.max(scores, dim=1)[1]  # or scores.argmax(dim=1)
    ```
    """

    code = "TW706"
    name = "index-of-reduced-tensor"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = "`{tensor}` has {rank} dimension{plural} here: `[{index}]` raises IndexError"

    def visit_Subscript(self, node: ast.Subscript, ctx: Context) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        value = ctx.value_of(node.value)
        if value is None or value.kind == F.LOSS or value.tensor is None:
            return
        info = value.tensor
        if info.container or info.dims is None:
            return
        index = node.slice
        held = node.value
        data = isinstance(held, ast.Attribute) and held.attr == "data"
        if info.dims == () and data and isinstance(index, ast.Constant) and index.value == 0:
            return  # `x.data[0]` of a 0-dim value: TW130's, with its fix
        if too_many_indices(info.dims, subscript_items(node.slice)):
            rank = len(info.dims)
            ctx.report(
                self,
                node,
                tensor=ctx.text(node.value),
                rank="no" if rank == 0 else str(rank),
                plural="" if rank == 1 else "s",
                index=ctx.text(node.slice),
            )
