"""Deprecated APIs (TW4xx): calls PyTorch has replaced, with safe renames."""

from __future__ import annotations

import ast

from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Edit, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import keyword, replace, replace_fix

_AMP_RENAMES = {
    # old qualified name -> (new call text, extra leading argument)
    "torch.cuda.amp.autocast": ("torch.amp.autocast", '"cuda"'),
    "torch.cpu.amp.autocast": ("torch.amp.autocast", '"cpu"'),
    "torch.cuda.amp.GradScaler": ("torch.amp.GradScaler", '"cuda"'),
    "torch.cuda.amp.custom_fwd": ("torch.amp.custom_fwd", None),
    "torch.cuda.amp.custom_bwd": ("torch.amp.custom_bwd", None),
}


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
    severity = Severity.WARNING
    message = "`{old}` is deprecated; use `{new}`"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in _AMP_RENAMES:
            return
        new, device = _AMP_RENAMES[qualname]
        shown = f"{new}({device})" if device else new
        ctx.report(self, node, fix=_amp_fix(ctx, node, new, device), old=qualname, new=shown)


def _amp_fix(ctx: Context, node: ast.Call, new: str, device: str | None) -> Fix | None:
    # Positional arguments would shift (the new APIs take the device first), and
    # the new text must resolve: only fix keyword-only calls with `torch` imported.
    if node.args or ctx.qualname(ast.Name("torch")) != "torch":
        return None
    edits = [replace(ctx, node.func, new)]
    if device is not None:
        if keyword(node, "device_type") or keyword(node, "device"):
            return None
        paren = ctx.source.index("(", ctx.span(node.func)[1]) + 1
        edits.append(Edit(paren, paren, device + (", " if node.keywords else "")))
    return Fix(f"Use `{new}`", tuple(edits), Applicability.SAFE)


@rule
class AutogradVariable(Rule):
    """## What it does
    Flags `torch.autograd.Variable(...)`.

    ## Why is this bad?
    `Variable` has been a no-op wrapper since PyTorch 0.4: tensors carry
    autograd state themselves. The call returns its argument (with
    `requires_grad` set when asked), so it only misleads readers.

    ## Example
    ```python
    from torch.autograd import Variable

    x = Variable(batch)
    w = Variable(torch.randn(3), requires_grad=True)
    ```

    ## Use instead
    ```python
    x = batch
    w = torch.randn(3, requires_grad=True)
    ```

    ## Fix safety
    Safe when the call has a single argument and no keywords: it is replaced by
    that argument. Calls with `requires_grad=` are left to you.
    """

    code = "TW403"
    name = "autograd-variable"
    family = "deprecated"
    severity = Severity.WARNING
    message = "`torch.autograd.Variable` is a deprecated no-op; use the tensor itself"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in {"torch.autograd.Variable", "torch.autograd.variable.Variable"}:
            return
        fix = None
        if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
            fix = replace_fix(ctx, node, ctx.text(node.args[0]), "Remove the `Variable` wrapper")
        ctx.report(self, node, fix=fix)
