"""Mixed-precision rules: GradScaler and float16 autocast."""

from __future__ import annotations

import ast

from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword

CLIP = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"}


AUTOCASTS = {"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast"}


def is_float16(call: ast.Call, ctx: Context) -> bool:
    dtype = keyword(call, "dtype")
    if dtype is not None:
        return ctx.qualname(dtype.value) in {"torch.float16", "torch.half"}
    if ctx.call_name(call) == "torch.cuda.amp.autocast":
        return True
    device = keyword(call, "device_type")
    first = device.value if device is not None else (call.args[0] if call.args else None)
    return isinstance(first, ast.Constant) and first.value == "cuda"
