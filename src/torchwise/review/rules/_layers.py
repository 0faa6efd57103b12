"""nn.Module definitions (TW12x-TW14x), continued: how layers are combined
and created (a bias BatchNorm cancels, layers built inside ``forward``,
functional dropout that ignores ``self.training``)."""

from __future__ import annotations

import ast

from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword

_CONVS = {f"torch.nn.Conv{n}d" for n in (1, 2, 3)}
_NORMS = {f"torch.nn.BatchNorm{n}d" for n in (1, 2, 3)} | {
    "torch.nn.SyncBatchNorm",
    *(f"torch.nn.LazyBatchNorm{n}d" for n in (1, 2, 3)),
}


def conv_with_bias(ctx: Context, expr: ast.AST) -> ast.Call | None:
    """``expr`` when it is ``nn.ConvNd(...)`` whose bias is on (the default)."""
    if not isinstance(expr, ast.Call) or ctx.call_name(expr) not in _CONVS:
        return None
    bias = keyword(expr, "bias")
    if bias is not None:
        return expr if isinstance(bias.value, ast.Constant) and bias.value.value is True else None
    if len(expr.args) >= 8 or any(isinstance(a, ast.Starred) for a in expr.args):
        return None  # bias given positionally, or maybe
    if any(item.arg is None for item in expr.keywords):
        return None  # **kwargs may turn it off
    return expr


def is_norm(ctx: Context, expr: ast.AST) -> bool:
    return isinstance(expr, ast.Call) and ctx.call_name(expr) in _NORMS


FUNCTIONAL_DROPOUT = {
    f"torch.nn.functional.{name}"
    for name in (
        "dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "alpha_dropout",
        "feature_alpha_dropout",
    )
}


PARAMETRIZED_LAYERS = {
    f"torch.nn.{name}"
    for name in (
        "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
        "ConvTranspose3d", "Embedding", "EmbeddingBag", "BatchNorm1d", "BatchNorm2d",
        "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "LSTM", "GRU", "RNN", "LSTMCell",
        "GRUCell", "RNNCell", "MultiheadAttention", "PReLU", "Transformer",
        "TransformerEncoderLayer", "TransformerDecoderLayer",
    )
}  # fmt: skip
