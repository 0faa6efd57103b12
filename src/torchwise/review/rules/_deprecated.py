"""Deprecated APIs (TW4xx): calls PyTorch has replaced, with safe renames.

Helpers shared by the TW401-TW411 rule modules. Tensor-function
deprecations have theirs in :mod:`._deprecated_tensor`.
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Applicability, Edit, Fix
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import constant, keyword
from torchwise.review.rules._util import replace

AMP_RENAMES = {
    # old qualified name -> (new call text, extra leading argument)
    "torch.cuda.amp.autocast": ("torch.amp.autocast", '"cuda"'),
    "torch.cpu.amp.autocast": ("torch.amp.autocast", '"cpu"'),
    "torch.cuda.amp.GradScaler": ("torch.amp.GradScaler", '"cuda"'),
    "torch.cuda.amp.custom_fwd": ("torch.amp.custom_fwd", None),
    "torch.cuda.amp.custom_bwd": ("torch.amp.custom_bwd", None),
}


def amp_fix(ctx: Context, node: ast.Call, new: str, device: str | None) -> Fix | None:
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


ACTIVATION_ALIASES = {
    "torch.nn.functional.sigmoid": "torch.sigmoid",
    "torch.nn.functional.tanh": "torch.tanh",
}


_FUNCTIONAL_LOSS = re.compile(
    r"torch\.nn\.functional\.(\w+_loss|cross_entropy|binary_cross_entropy\w*|kl_div)$"
)
LEGACY_REDUCTION = ("size_average", "reduce")


def is_loss(qualname: str | None) -> bool:
    if qualname is None:
        return False
    if _FUNCTIONAL_LOSS.match(qualname):
        return True
    return (
        qualname.startswith("torch.nn.") and qualname.count(".") == 2 and qualname.endswith("Loss")
    )


def forwarded(item: ast.keyword) -> bool:
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


CLIP_GRAD_NORM = {"torch.nn.utils.clip_grad_norm", "torch.nn.utils.clip_grad.clip_grad_norm"}


CHECKPOINTS = {
    "torch.utils.checkpoint.checkpoint",
    "torch.utils.checkpoint.checkpoint_sequential",
}
