"""TW402 removed-linalg-function (deprecated).

The class docstring is its user documentation (`torchwise rules TW402`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated_tensor import REMOVED
from torchwise.review.rules._util import in_compat_code


@rule
class RemovedLinalgFunction(Rule):
    """## What it does
    Flags `torch.solve`, `torch.lstsq`, `torch.symeig`, `torch.eig` and
    `torch.matrix_rank`.

    ## Why is this bad?
    They were deprecated in PyTorch 1.9 and removed in 1.13/2.0: the names
    still exist only to raise `RuntimeError` when called. The `torch.linalg`
    replacements differ in argument order or return types, so the port needs
    a human.

    ## Example
    ```python
    import torch

    x, _ = torch.solve(b, A)
    ```

    ## Use instead
    ```python
    import torch

    x = torch.linalg.solve(A, b)
    ```
    """

    code = "TW402"
    name = "removed-linalg-function"
    family = "deprecated"
    severity = Severity.ERROR
    message = "`{old}` was removed from PyTorch and raises when called; use `{new})"

    call_names = frozenset(REMOVED)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        if qualname in REMOVED:
            if in_compat_code(ctx):
                return  # deliberate compatibility code for older torch
            ctx.report(self, node, old=qualname, new=REMOVED[qualname])
