"""TW404 functional-activation-alias (deprecated).

The class docstring is its user documentation (`torchwise rules TW404`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated import ACTIVATION_ALIASES
from torchwise.review.rules._util import in_compat_code, replace_fix, torch_is_imported


@rule
class FunctionalActivationAlias(Rule):
    """## What it does
    Flags `F.sigmoid(x)` and `F.tanh(x)`. Off by default: PyTorch deprecated
    these aliases from 0.4.1 to 2.0 and has since kept them as plain aliases.

    ## Why is this bad?
    `torch.sigmoid` and `torch.tanh` are the canonical functions; on PyTorch
    releases before 2.1 the `F.` aliases print a deprecation warning on every
    call, which floods the logs of projects that still support them.

    ## Example
    ```python
    import torch.nn.functional as F

    gate = F.sigmoid(x)
    ```

    ## Use instead
    ```python
    import torch

    gate = torch.sigmoid(x)
    ```

    ## Fix safety
    Safe: the alias calls exactly the same function. Offered when `torch` is
    imported under its own name, so the new text resolves.
    """

    code = "TW404"
    name = "functional-activation-alias"
    family = "deprecated"
    severity = Severity.INFO
    default_enabled = False
    message = "`{old}` is a legacy alias; use `{new}`"
    fix = Applicability.SAFE

    call_names = frozenset(ACTIVATION_ALIASES)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        new = ACTIVATION_ALIASES.get(qualname or "")
        if new is None:
            return
        fix = replace_fix(ctx, node.func, new, f"Use `{new}`") if torch_is_imported(ctx) else None
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, old=f"F.{new[6:]}", new=new)
