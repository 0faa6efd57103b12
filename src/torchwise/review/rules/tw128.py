"""TW128 softmax-without-dim (numerics).

The class docstring is its user documentation (`torchwise rules TW128`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._numerics import SOFTMAX_FAMILY


@rule
class SoftmaxWithoutDim(Rule):
    """## What it does
    Flags `F.softmax`, `F.log_softmax`, `F.softmin` and the `nn.Softmax`,
    `nn.LogSoftmax`, `nn.Softmin` modules called without `dim` (or with
    `dim=None`): a warning on an input known to be 3-d (the guess, dim 0, is
    the batch), a hint where the rank is unknown, nothing where the guess is
    right (1-d, 2-d, 4-d inputs).

    ## Why is this bad?
    Without `dim`, PyTorch guesses: dimension 0 for 0-, 1- and 3-dimensional
    inputs, 1 otherwise. A batch of sequences `(B, T, C)` is then normalised
    over the batch, silently; the guess is deprecated and warns at run time.

    ## Example
    ```python
    import torch.nn.functional as F
    from torch import nn

    probs = F.softmax(logits)
    head = nn.LogSoftmax()
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F
    from torch import nn

    probs = F.softmax(logits, dim=-1)
    head = nn.LogSoftmax(dim=-1)
    ```
    """

    code = "TW128"
    name = "softmax-without-dim"
    family = "numerics"
    severity = Severity.WARNING
    impact = "maintenance"
    message = "`{callee}` without `dim`: PyTorch guesses the dimension from the input's rank"

    call_names = frozenset(SOFTMAX_FAMILY)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        position = SOFTMAX_FAMILY.get(qualname or "")
        if position is None or has_kwargs_splat(node):
            return
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            return
        item = keyword(node, "dim")
        dim = item.value if item else node.args[position] if len(node.args) > position else None
        if dim is None or (isinstance(dim, ast.Constant) and dim.value is None):
            assert qualname is not None
            callee = qualname.replace("torch.nn.functional.", "F.")
            info = ctx.tensor_of(node.args[0]) if node.args else None
            rank = None if info is None or info.dims is None else len(info.dims)
            if rank is not None and rank != 3:
                return  # 1-d: its one dim; 2-d: the classes; 4-d: the channels
            if rank == 3:
                message = (
                    "`{callee}` without `dim` on a 3-d input: PyTorch picks dim=0, "
                    "across the batch, not the classes; pass `dim=-1`"
                )
                ctx.report(self, node, message=message, callee=callee)
                return
            ctx.report(self, node, callee=callee, severity=Severity.INFO)
