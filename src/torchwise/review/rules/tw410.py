"""TW410 clip-grad-norm-without-underscore (deprecated).

The class docstring is its user documentation (`torchwise rules TW410`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated import CLIP_GRAD_NORM
from torchwise.review.rules._util import in_compat_code, rename_attribute


@rule
class ClipGradNormWithoutUnderscore(Rule):
    """## What it does
    Flags `torch.nn.utils.clip_grad_norm(...)`, the deprecated spelling of
    `clip_grad_norm_`.

    ## Why is this bad?
    The function clips gradients in place, which the trailing underscore
    says; the old name is deprecated, warns on every call, and will be
    removed.

    ## Example
    ```python
    import torch

    torch.nn.utils.clip_grad_norm(model.parameters(), max_norm=1.0)
    ```

    ## Use instead
    ```python
    import torch

    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    ```

    ## Fix safety
    Safe: the old name forwards every argument to `clip_grad_norm_`. Offered
    when the call is spelled with a module prefix (`nn.utils.clip_grad_norm`);
    a bare imported name would also need its import changed.
    """

    code = "TW410"
    name = "clip-grad-norm-without-underscore"
    family = "deprecated"
    severity = Severity.INFO
    message = "`clip_grad_norm` is deprecated; use `clip_grad_norm_`"
    fix = Applicability.SAFE

    call_names = frozenset(CLIP_GRAD_NORM)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in CLIP_GRAD_NORM:
            return
        fix = None
        if isinstance(node.func, ast.Attribute):
            edit = rename_attribute(ctx, node.func, "clip_grad_norm_")
            fix = Fix("Use `clip_grad_norm_`", (edit,), Applicability.SAFE)
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix)
