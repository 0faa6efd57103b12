"""TW709 layer-input-rank-mismatch (tensors).

The class docstring is its user documentation (`torchwise rules TW709`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

#: Layers that need a (N, C, H, W) or (N, C, D, H, W) input.
_SPATIAL = frozenset(
    {
        "BatchNorm2d", "BatchNorm3d", "InstanceNorm2d", "InstanceNorm3d", "Conv2d", "Conv3d",
        "ConvTranspose2d", "ConvTranspose3d", "MaxPool2d", "MaxPool3d", "AvgPool2d",
        "AvgPool3d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "LazyBatchNorm2d",
    }
)  # fmt: skip
#: Of those, the ones whose first argument is the channel count.
_CHANNELS_FIRST = frozenset(
    {"BatchNorm2d", "BatchNorm3d", "InstanceNorm2d", "InstanceNorm3d", "Conv2d", "Conv3d",
     "ConvTranspose2d", "ConvTranspose3d"}
)  # fmt: skip
#: Layers that keep the rank (and, for Linear's features, the feature count).
_KEEPING = frozenset(
    {
        "ReLU", "LeakyReLU", "ELU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softplus", "PReLU",
        "ReLU6", "Hardtanh", "Mish", "Dropout", "AlphaDropout", "Identity",
    }
)  # fmt: skip


@rule
class LayerInputRankMismatch(Rule):
    """## What it does
    Follows the shape of the tensor through an `nn.Sequential(...)` written
    out layer by layer and flags a layer that cannot take what the previous
    one gives: a 2-D or 3-D spatial layer (`BatchNorm2d`, `Conv2d`,
    `MaxPool2d`, ...) after `nn.Flatten()`, or after `nn.Linear(k, F)` whose
    `F` features it takes as its channels; and a `Linear` whose input size is
    a product of a feature map's sizes (`nn.Linear(32 * 13 * 13, 10)`) right
    after convolutions, with no `nn.Flatten()` between.

    ## Why is this bad?
    The first forward raises: `BatchNorm2d` wants a 4-D input ("expected 4D
    input (got 2D input)"), and a `Linear` applies to the last dimension only,
    which is the map's width, not the flattened features ("mat1 and mat2
    shapes cannot be multiplied").

    ## Example
    ```python
    import torch.nn as nn

    preprocess = nn.Sequential(nn.Linear(128, 4 * 4 * 256), nn.BatchNorm2d(4 * 4 * 256), nn.ReLU())
    ```

    ## Use instead
    ```python
    import torch.nn as nn

    preprocess = nn.Sequential(nn.Linear(128, 4 * 4 * 256), nn.BatchNorm1d(4 * 4 * 256), nn.ReLU())
    ```
    """

    code = "TW709"
    name = "layer-input-rank-mismatch"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = "`{layer}` {problem}: the first forward raises"
    call_names = frozenset({"torch.nn.Sequential"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) != "torch.nn.Sequential":
            return
        state: tuple[str, str] | None = None  # ("flat"|"linear"|"spatial", features)
        for layer in node.args:
            if not isinstance(layer, ast.Call):
                state = None
                continue
            qualname = ctx.call_name(layer) or ""
            if not qualname.startswith("torch.nn."):
                state = None
                continue
            name = qualname.rsplit(".", 1)[-1]
            problem = _problem(name, layer, state, ctx)
            if problem is not None:
                ctx.report(self, layer, layer=f"nn.{name}", problem=problem)
                return
            state = _after(name, layer, state, ctx)


def _problem(name: str, layer: ast.Call, state: tuple[str, str] | None, ctx: Context) -> str | None:
    if state is None:
        return None
    kind, features = state
    if name in _SPATIAL:
        if kind == "flat":
            return "needs a (N, C, H, W) input but `nn.Flatten()` before it gives (N, features)"
        channels = _first(layer, ctx)
        if kind == "linear" and name in _CHANNELS_FIRST and channels == features:
            return (
                f"takes the {features} features of the `nn.Linear` before it as channels, "
                "but it gives (N, features), not a 4-D map"
            )
    if name == "Linear" and kind == "spatial":
        size = layer.args[0] if layer.args else None
        if isinstance(size, ast.BinOp) and isinstance(size.op, ast.Mult):
            return (
                f"is sized for a flattened map ({ctx.text(size)}) but gets the feature map "
                "itself: it applies to the last dimension only; add `nn.Flatten()` before it"
            )
    return None


def _after(
    name: str, layer: ast.Call, state: tuple[str, str] | None, ctx: Context
) -> tuple[str, str] | None:
    """What the tensor is after ``layer``."""
    if name == "Flatten":
        start = layer.args[0] if layer.args else None
        default = start is None or (isinstance(start, ast.Constant) and start.value == 1)
        return ("flat", "") if default and not layer.keywords else None
    if name == "Linear":
        out = layer.args[1] if len(layer.args) > 1 else None
        for item in layer.keywords:
            if item.arg == "out_features":
                out = item.value
        return ("linear", _normal(ctx.text(out))) if out is not None else None
    if name in _SPATIAL:
        return ("spatial", "")
    if name in _KEEPING or name.startswith(("BatchNorm1d", "LayerNorm")):
        return state
    return None


def _first(layer: ast.Call, ctx: Context) -> str | None:
    if layer.args:
        return _normal(ctx.text(layer.args[0]))
    for item in layer.keywords:
        if item.arg in {"num_features", "in_channels"}:
            return _normal(ctx.text(item.value))
    return None


def _normal(text: str) -> str:
    return "".join(text.split())
