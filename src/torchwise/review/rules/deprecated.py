"""Deprecated APIs (TW4xx): calls PyTorch has replaced, with safe renames.

Linear algebra, ``torch.range``, legacy tensor types and ``assert_allclose``
live in :mod:`torchwise.review.rules.deprecated_tensor` (imported at the end).
"""

from __future__ import annotations

import ast
import re

from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Edit, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import (
    add_keyword,
    constant,
    has_kwargs_splat,
    in_compat_code,
    keyword,
    remove_keyword,
    rename_attribute,
    replace,
    replace_fix,
    torch_is_imported,
)

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
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
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
        if ctx.call_name(node) not in {
            "torch.autograd.Variable",
            "torch.autograd.variable.Variable",
        }:
            return
        fix = None
        if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
            fix = replace_fix(ctx, node, ctx.text(node.args[0]), "Remove the `Variable` wrapper")
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix)


_ACTIVATION_ALIASES = {
    "torch.nn.functional.sigmoid": "torch.sigmoid",
    "torch.nn.functional.tanh": "torch.tanh",
}


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

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        new = _ACTIVATION_ALIASES.get(qualname or "")
        if new is None:
            return
        fix = replace_fix(ctx, node.func, new, f"Use `{new}`") if torch_is_imported(ctx) else None
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, old=f"F.{new[6:]}", new=new)


_FUNCTIONAL_LOSS = re.compile(
    r"torch\.nn\.functional\.(\w+_loss|cross_entropy|binary_cross_entropy\w*|kl_div)$"
)
_LEGACY_REDUCTION = ("size_average", "reduce")


def _is_loss(qualname: str | None) -> bool:
    if qualname is None:
        return False
    if _FUNCTIONAL_LOSS.match(qualname):
        return True
    return (
        qualname.startswith("torch.nn.") and qualname.count(".") == 2 and qualname.endswith("Loss")
    )


def _forwarded(item: ast.keyword) -> bool:
    return isinstance(item.value, ast.Name) and item.value.id == item.arg


def legacy_reduction(size_average: ast.expr | None, reduce: ast.expr | None) -> str | None:
    """The `reduction=` string torch derives (``legacy_get_string``), if both are literals."""
    values = []
    for node in (size_average, reduce):
        value = None if node is None else constant(node)
        if value not in (None, True, False):
            return None  # a variable: only known at run time
        values.append(True if value is None else value)  # None means the default, True
    size_average_on, reduce_on = values
    if not reduce_on:
        return "none"
    return "mean" if size_average_on else "sum"


@rule
class LegacyLossReduction(Rule):
    """## What it does
    Flags `size_average=` and `reduce=` passed to a loss module
    (`nn.MSELoss(size_average=False)`) or a functional loss
    (`F.cross_entropy(..., reduce=False)`).

    ## Why is this bad?
    Both arguments have been deprecated since PyTorch 0.4.1 in favour of the
    single `reduction=` string and warn on every construction or call. When
    present they silently override `reduction=`, and their combinations are
    easy to misread (`reduce=False` wins over any `size_average`).

    ## Example
    ```python
    from torch import nn

    criterion = nn.MSELoss(size_average=False)
    per_sample = nn.CrossEntropyLoss(reduce=False)
    ```

    ## Use instead
    ```python
    from torch import nn

    criterion = nn.MSELoss(reduction="sum")
    per_sample = nn.CrossEntropyLoss(reduction="none")
    ```

    ## Fix safety
    Safe when both values are literals (`True`, `False`, `None`): the fix
    writes exactly the string PyTorch derives from them (`reduce=False` gives
    `"none"`; otherwise `size_average=False` gives `"sum"`; else `"mean"`),
    replacing any `reduction=` they were overriding. Variables get no fix.
    """

    code = "TW405"
    name = "legacy-loss-reduction"
    family = "deprecated"
    severity = Severity.WARNING
    message = "`{args}` is deprecated; use `reduction=`"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        legacy = [item for item in node.keywords if item.arg in _LEGACY_REDUCTION]
        if not legacy or not _is_loss(ctx.call_name(node)):
            return
        if all(_forwarded(item) for item in legacy):
            return  # a wrapper passing its caller's `size_average=size_average` along
        size_average, reduce = (keyword(node, name) for name in _LEGACY_REDUCTION)
        reduction = legacy_reduction(
            size_average.value if size_average else None, reduce.value if reduce else None
        )
        fix = None
        if reduction is not None and not has_kwargs_splat(node):
            text = f'"{reduction}"'
            existing = keyword(node, "reduction")
            if existing is not None:
                edits = [replace(ctx, existing.value, text)]
                edits += [remove_keyword(ctx, node, item) for item in legacy]
            else:
                edits = [replace(ctx, legacy[0], f"reduction={text}")]
                edits += [remove_keyword(ctx, node, item) for item in legacy[1:]]
            fix = Fix(f"Use `reduction={text}`", tuple(edits), Applicability.SAFE)
        args = ", ".join(f"{item.arg}=" for item in legacy)
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, args=args)


_CLIP_GRAD_NORM = {"torch.nn.utils.clip_grad_norm", "torch.nn.utils.clip_grad.clip_grad_norm"}


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
    severity = Severity.WARNING
    message = "`clip_grad_norm` is deprecated; use `clip_grad_norm_`"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in _CLIP_GRAD_NORM:
            return
        fix = None
        if isinstance(node.func, ast.Attribute):
            edit = rename_attribute(ctx, node.func, "clip_grad_norm_")
            fix = Fix("Use `clip_grad_norm_`", (edit,), Applicability.SAFE)
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix)


_CHECKPOINTS = {
    "torch.utils.checkpoint.checkpoint",
    "torch.utils.checkpoint.checkpoint_sequential",
}


@rule
class CheckpointWithoutUseReentrant(Rule):
    """## What it does
    Flags `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential`
    called without `use_reentrant=`.

    ## Why is this bad?
    PyTorch warns on every such call: the implicit default (`True`, the
    reentrant variant) is slated to become an error. The reentrant variant
    also has a silent trap: when no input of the checkpointed function
    requires grad (a frozen embedding feeding it), its parameters get no
    gradient at all. `use_reentrant=False` is the recommended variant.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    h = checkpoint(block, h)
    ```

    ## Use instead
    ```python
    from torch.utils.checkpoint import checkpoint

    h = checkpoint(block, h, use_reentrant=False)
    ```

    ## Fix safety
    Unsafe: the fix passes `use_reentrant=False`, which changes how the
    backward pass recomputes the block (gradients flow where they silently
    did not before, and keyword arguments are passed through). Pass
    `use_reentrant=True` yourself to keep the old behaviour exactly.
    """

    code = "TW411"
    name = "checkpoint-without-use-reentrant"
    family = "deprecated"
    severity = Severity.WARNING
    message = "`{callee}` without `use_reentrant=` warns, and its default is going away"
    fix = Applicability.UNSAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in _CHECKPOINTS or keyword(node, "use_reentrant"):
            return
        if has_kwargs_splat(node):
            return  # use_reentrant may be in **kwargs
        edit = add_keyword(ctx, node, "use_reentrant=False")
        fix = Fix("Pass `use_reentrant=False`", (edit,), Applicability.UNSAFE)
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, callee=qualname.rsplit(".", 1)[-1])
