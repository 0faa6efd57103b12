"""TW139 batchnorm-momentum-as-eps (modules).

The class docstring is its user documentation (`torchwise rules TW139`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

_NORMS = {
    "torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d",
    "torch.nn.SyncBatchNorm", "torch.nn.InstanceNorm1d", "torch.nn.InstanceNorm2d",
    "torch.nn.InstanceNorm3d", "torch.nn.LazyBatchNorm1d", "torch.nn.LazyBatchNorm2d",
    "torch.nn.LazyBatchNorm3d",
}  # fmt: skip
#: No one means an epsilon this large: it is a momentum (Keras-style 0.8, 0.9, 0.99).
_LARGEST_EPS = 0.01


@rule
class BatchNormMomentumAsEps(Rule):
    """## What it does
    Flags `nn.BatchNorm2d(channels, 0.8)` (any batch or instance norm) whose
    second positional argument is 0.01 or more.

    ## Why is this bad?
    The second parameter of PyTorch's norms is `eps`, not `momentum` (Keras
    puts momentum there). `eps=0.8` is added to the variance before the square
    root: activations with a variance below about 1 are barely normalised, so
    the layer behaves like a weak, badly scaled batch norm and the model trains
    differently than intended. Nothing errors.

    ## Example
    ```python
    from torch import nn

    norm = nn.BatchNorm2d(128, 0.8)
    ```

    ## Use instead
    ```python
    from torch import nn

    norm = nn.BatchNorm2d(128, momentum=0.2)  # Keras momentum 0.8 is PyTorch's 0.2
    ```
    """

    code = "TW139"
    name = "batchnorm-momentum-as-eps"
    family = "modules"
    severity = Severity.ERROR
    message = (
        "`{layer}(..., {value})` sets `eps={value}`, not momentum: "
        "pass `momentum=` by keyword (PyTorch's momentum is 1 minus Keras's)"
    )

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if len(node.args) < 2:
            return
        second = node.args[1]
        if not (isinstance(second, ast.Constant) and isinstance(second.value, (int, float))):
            return
        if isinstance(second.value, bool) or second.value < _LARGEST_EPS:
            return
        qualname = ctx.call_name(node)
        if qualname in _NORMS:
            ctx.report(self, node, layer=qualname.rsplit(".", 1)[-1], value=repr(second.value))
