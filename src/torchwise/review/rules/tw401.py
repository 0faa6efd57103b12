"""TW401 deprecated-amp-api (deprecated).

The class docstring is its user documentation (`torchwise rules TW401`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated import AMP_RENAMES, amp_fix
from torchwise.review.rules._util import in_compat_code


@rule
class DeprecatedAmp(Rule):
    """## What it does
    Flags `torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler` and
    `torch.cpu.amp.autocast`.

    ## Why is this bad?
    These device-specific entry points are deprecated since PyTorch 2.4 and
    emit a `FutureWarning` on every call; `torch.amp` takes the device type as
    its first argument and is the supported API.

    ## Example
    ```python
    import torch

    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast():
        loss = model(x).sum()
    ```

    ## Use instead
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda"):
        loss = model(x).sum()
    ```

    ## Fix safety
    Safe: `torch.amp.autocast("cuda", ...)` and `torch.amp.GradScaler("cuda", ...)`
    take the same remaining arguments. The fix is offered only when `torch` is
    imported under its own name, so the new text resolves.
    """

    code = "TW401"
    name = "deprecated-amp-api"
    family = "deprecated"
    severity = Severity.INFO
    message = "`{old}` is deprecated; use `{new}`"
    fix = Applicability.SAFE

    call_names = frozenset(AMP_RENAMES)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in AMP_RENAMES:
            return
        new, device = AMP_RENAMES[qualname]
        shown = f"{new}({device})" if device else new
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=amp_fix(ctx, node, new, device), old=qualname, new=shown)
