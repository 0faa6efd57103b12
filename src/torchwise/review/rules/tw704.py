"""TW704 column-broadcast-against-vector (tensors).

The class docstring is its user documentation (`torchwise rules TW704`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.tensors import TensorInfo, mutual_broadcast
from torchwise.review.registry import Rule, rule

#: Losses whose input and target are compared element by element.
_ELEMENTWISE_LOSSES = frozenset(
    {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
     "binary_cross_entropy_with_logits", "soft_margin_loss", "poisson_nll_loss"}
)  # fmt: skip
_LOSS_MODULES = frozenset(
    {"MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
     "SoftMarginLoss", "PoissonNLLLoss"}
)  # fmt: skip
_COMPARING = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_ELEMENTWISE_OPS = (ast.Sub, ast.Add, ast.Mult, ast.Div)
_METHODS = frozenset({"eq", "ne", "sub", "add", "mul", "div", "lt", "le", "gt", "ge"})
_ORIGINS = {
    "linear-1": "a layer with one output (`nn.Linear(k, 1)`)",
    "keepdim": "a reduction with `keepdim=True`",
}


@rule
class ColumnBroadcastAgainstVector(Rule):
    """## What it does
    Flags a loss, a comparison or an element-wise operation between a column
    `(N, 1)` and a vector `(N,)`: the output of a model whose last layer has
    one output (`nn.Linear(k, 1)`) or of a reduction with `keepdim=True`, and
    a batch of labels or targets (a `DataLoader` over torchvision's
    classification sets or over a `TensorDataset` of vectors).

    ## Why is this bad?
    Broadcasting turns the pair into an `(N, N)` matrix: `MSELoss` and
    `L1Loss` average over every pair of the batch (and only warn), an
    accuracy counts `N * N` comparisons, `(pred - y) ** 2` is a matrix. The
    model trains on the wrong objective and reports wrong metrics, without an
    error (`BCELoss` does raise).

    ## Example
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.randn(256, 8), torch.randn(256))
    model = nn.Linear(8, 1)
    for x, y in DataLoader(data, batch_size=32, shuffle=True):
        loss = nn.functional.mse_loss(model(x), y)
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.randn(256, 8), torch.randn(256))
    model = nn.Linear(8, 1)
    for x, y in DataLoader(data, batch_size=32, shuffle=True):
        loss = nn.functional.mse_loss(model(x).squeeze(1), y)
    ```
    """

    code = "TW704"
    name = "column-broadcast-against-vector"
    family = "tensors"
    severity = Severity.ERROR
    impact = "results"
    message = (
        "`{column}` is a column (N, 1) ({origin}) and `{vector}` a vector (N,){made}: "
        "{what} {effect}"
    )

    def visit_Compare(self, node: ast.Compare, ctx: Context) -> None:
        if len(node.ops) == 1 and isinstance(node.ops[0], _COMPARING):
            self._check(node, node.left, node.comparators[0], "the comparison", ctx)

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> None:
        if isinstance(node.op, _ELEMENTWISE_OPS):
            self._check(node, node.left, node.right, "the operation", ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        qualname = ctx.call_name(node) or ""
        if qualname.startswith("torch.nn.functional.") and qualname[20:] in _ELEMENTWISE_LOSSES:
            if len(node.args) >= 2:
                self._check(node, node.args[0], node.args[1], f"`{qualname[20:]}`", ctx)
            return
        if isinstance(func, ast.Attribute) and func.attr in _METHODS and len(node.args) == 1:
            self._check(node, func.value, node.args[0], f"`.{func.attr}()`", ctx)
            return
        if isinstance(func, (ast.Name, ast.Attribute)) and len(node.args) >= 2:
            callee = ctx.value_of(func)
            origin = "" if callee is None else (callee.origin or "")
            if callee is not None and callee.kind == F.LOSS_FN:
                name = origin.rsplit(".", 1)[-1]
                if name in _LOSS_MODULES:
                    self._check(node, node.args[0], node.args[1], f"`{name}`", ctx)

    def _check(
        self, node: ast.AST, left: ast.expr, right: ast.expr, what: str, ctx: Context
    ) -> None:
        a, b = ctx.tensor_of(left), ctx.tensor_of(right)
        if a is None or b is None or not mutual_broadcast(a, b):
            return
        column, vector = (left, right) if _is_column(a) else (right, left)
        info = a if column is left else b
        made = ctx.value_of(vector)
        line = getattr(None if made is None else made.node, "lineno", None)
        raises = what in {"`BCELoss`", "`BCEWithLogitsLoss`", "`binary_cross_entropy`",
                          "`binary_cross_entropy_with_logits`"}  # fmt: skip
        ctx.report(
            self,
            node,
            column=ctx.text(column),
            vector=ctx.text(vector),
            origin=_ORIGINS.get(info.unit_dim or "", "a size-1 dimension"),
            what=what,
            made="" if line is None or line == getattr(node, "lineno", 0) else f" (line {line})",
            vector_line="" if line is None else str(line),
            effect=(
                "raises ValueError: the target's size differs from the input's"
                if raises
                else "broadcasts them to an (N, N) matrix"
            ),
        )


def _is_column(info: TensorInfo) -> bool:
    return info.unit_dim is not None and info.dims is not None and len(info.dims) == 2
