"""TW406 deprecated-linalg-function (deprecated).

The class docstring is its user documentation (`torchwise rules TW406`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated_tensor import (
    DEPRECATED,
    LINALG_FIXES,
    plain_args,
    torch_prefix,
)
from torchwise.review.rules._util import in_compat_code, replace


@rule
class DeprecatedLinalgFunction(Rule):
    """## What it does
    Flags `torch.norm`, `torch.chain_matmul`, `torch.qr`, `torch.cholesky`,
    `torch.ger`, `torch.lu`, `torch.lu_solve`, `torch.triangular_solve` and
    `torch.svd`, which PyTorch deprecated in favour of `torch.linalg`.

    ## Why is this bad?
    They are slated for removal (several warn on every call), and their
    semantics are irregular: `torch.norm`'s result depends on the
    combination of `p` and `dim` in ways its own documentation calls
    unreliable, and `torch.svd` returns `V` where `torch.linalg.svd` returns
    `Vh`. The `torch.linalg` functions are the maintained, NumPy-compatible API.

    ## Example
    ```python
    import torch

    n = torch.norm(x, dim=-1)
    q, r = torch.qr(a)
    ```

    ## Use instead
    ```python
    import torch

    n = torch.linalg.vector_norm(x, dim=-1)
    q, r = torch.linalg.qr(a)
    ```

    ## Fix safety
    Safe, and offered only where the new call is the same computation:
    `torch.ger` (an alias of `torch.outer`); `torch.chain_matmul(a, b, ...)`
    (`multi_dot` of the same list); `torch.qr(a[, some])` (`mode="reduced"`
    or `"complete"`); `torch.cholesky(a)` with `upper` false; and `torch.norm`
    with a numeric or `"fro"` `p` and no `dim` or one integer `dim`, which
    `torch.norm` itself computes by calling `torch.linalg.vector_norm`.
    `torch.lu`, `lu_solve`, `triangular_solve` and `svd` change argument
    order or results, so they get no fix.
    """

    code = "TW406"
    name = "deprecated-linalg-function"
    family = "deprecated"
    severity = Severity.INFO
    message = "`{old}` is deprecated; use `{new}`"
    fix = Applicability.SAFE

    call_names = frozenset(DEPRECATED)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        new = DEPRECATED.get(qualname)
        if new is None:
            return
        fix = None
        prefix = torch_prefix(node, ctx)
        if prefix is not None and plain_args(node):
            text = LINALG_FIXES[qualname](node, prefix, ctx)
            if text is not None:
                fix = Fix(f"Use `{text.split('(', 1)[0]}`", (replace(ctx, node, text),))
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, old=qualname, new=new)
