"""TW129 view-after-permute (modules).

The class docstring is its user documentation (`torchwise rules TW129`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._tensor_ops import permutation_of, view_fails


@rule
class ViewAfterPermute(Rule):
    """## What it does
    Flags `.view(...)` applied directly to `.permute(...)` when the sizes it is
    given merge dimensions that the permutation moved apart
    (`x.permute(0, 2, 1, 3).view(b, t, -1)`, `.view(b, t, h * d)`,
    `.view(-1)`). Views that only split dimensions work and are not flagged,
    nor are views after `.transpose()` or `.t()`, whose rank (and so whether
    a merge happens) cannot be read from the source.

    ## Why is this bad?
    The permuted tensor is not contiguous, and `view` cannot merge dimensions
    whose strides no longer line up: it raises `RuntimeError: view size is not
    compatible with input tensor's size and stride` (unless the merged sizes
    happen to be 1, or the input had an unusual memory format).

    ## Example
    ```python
    out = attn.permute(0, 2, 1, 3).view(batch, seq, heads * dim)
    ```

    ## Use instead
    ```python
    out = attn.permute(0, 2, 1, 3).reshape(batch, seq, heads * dim)
    ```

    ## Fix safety
    Safe: `reshape` returns a view whenever `view` would have succeeded, and
    copies only where `view` raises.
    """

    code = "TW129"
    name = "view-after-permute"
    family = "modules"
    severity = Severity.WARNING
    message = "`.view()` merges dimensions `.permute()` made non-contiguous: use `.reshape()`"
    fix = Applicability.SAFE

    call_methods = frozenset({"view"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "view" or node.keywords:
            return
        perm = permutation_of(func.value)
        if perm is None or not view_fails(perm, node.args):
            return
        end = ctx.span(func)[1]
        fix = Fix("Use `.reshape()`", (Edit(end - len("view"), end, "reshape"),))
        ctx.report(self, node, fix=fix)
