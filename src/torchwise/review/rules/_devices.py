"""Device rules (TW70x): which calls need their tensors on one device, what a
model call accepts, and how a tensor's device is told to the user."""

from __future__ import annotations

import ast

from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.tensor_values import INPUT_MOVING_WRAPPERS, MULTI_TENSOR
from torchwise.review.engine.tensors import TensorInfo

__all__ = [
    "LOSS_FUNCTIONS",
    "MULTI_TENSOR",
    "MULTI_TENSOR_METHODS",
    "accepts_inputs_anywhere",
    "describe",
    "operand_infos",
]

#: Tensor methods whose tensor arguments must be on the receiver's device.
MULTI_TENSOR_METHODS = frozenset(
    {
        "add", "sub", "mul", "div", "matmul", "mm", "bmm", "eq", "ne", "lt", "le", "gt",
        "ge", "maximum", "minimum", "masked_fill", "masked_fill_", "gather", "index_select",
        "where", "masked_scatter", "scatter", "scatter_", "scatter_add", "scatter_add_",
        "index_add", "index_add_", "add_", "sub_", "mul_", "div_", "take_along_dim",
        "masked_select", "dot", "outer", "cross",
    }
)  # fmt: skip

#: Functional losses: input and target must share a device.
LOSS_FUNCTIONS = frozenset(
    f"torch.nn.functional.{name}"
    for name in (
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
        "poisson_nll_loss", "gaussian_nll_loss", "soft_margin_loss", "multilabel_margin_loss",
        "multilabel_soft_margin_loss", "multi_margin_loss", "hinge_embedding_loss",
        "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss", "ctc_loss",
    )
)  # fmt: skip


def accepts_inputs_anywhere(model: F.Value, ctx: Context) -> bool:
    """Whether calling ``model`` with CPU inputs is fine: a DataParallel/DDP
    wrapper (it scatters or moves them), or a project class whose forward
    moves its inputs itself."""
    origin = model.origin or ""
    if origin in INPUT_MOVING_WRAPPERS or origin.endswith("DataParallel"):
        return True
    klass = ctx.project.klass(origin) if origin else None
    return klass is not None and klass.fact.moves_inputs


def operand_infos(operands: list[ast.expr], ctx: Context) -> list[tuple[ast.expr, TensorInfo]]:
    """The tensor facts of each operand that has some (a container's: its elements')."""
    found = []
    for operand in operands:
        info = ctx.tensor_of(operand)
        if info is None:
            continue
        if info.container:
            info = info.element()
        found.append((operand, info))
    return found


def describe(
    expr: ast.expr, info: TensorInfo, ctx: Context, model: bool = False
) -> tuple[str, str]:
    """("`labels`", "a batch of the loader over `data`: ..., line 44") for a message."""
    text = ctx.text(expr)
    if len(text) > 40:
        text = text[:37] + "..."
    shown = f"the model `{text}`" if model else f"`{text}`"
    place = info.place
    if place is None:
        return shown, "unknown"
    evidence = place.evidence()
    if _plain_attribute(expr, info, ctx):
        evidence = f"a plain tensor attribute, which `.to()` does not move: {evidence}"
    return shown, evidence


def _plain_attribute(expr: ast.expr, info: TensorInfo, ctx: Context) -> bool:
    """``self.scale`` holding a CPU tensor inside a module's method."""
    return (
        info.device == "cpu"
        and isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
        and ctx.in_module_class
    )
