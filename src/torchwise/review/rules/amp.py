"""Mixed-precision rules: GradScaler and float16 autocast."""

from __future__ import annotations

import ast

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    is_tensor_backward,
    position,
    top_level_calls,
)
from torchwise.review.rules._util import keyword

_CLIP = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"}


@rule
class ClipWithoutUnscale(Rule):
    """## What it does
    Flags gradient clipping in a function that scales the loss with a
    `GradScaler` but does not call `scaler.unscale_(optimizer)` before clipping.

    ## Why is this bad?
    With a `GradScaler` the gradients are multiplied by the loss scale (65536
    by default). Clipping them at `max_norm=1.0` clips the *scaled* norm, so
    the real gradients are shrunk by orders of magnitude and the model barely
    trains.

    ## Example
    ```python
    import torch

    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    ```

    ## Use instead
    ```python
    import torch

    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    ```
    """

    code = "TW109"
    name = "clip-without-unscale"
    family = "training"
    severity = Severity.ERROR
    message = (
        "gradients are clipped while still scaled by the GradScaler; "
        "call `scaler.unscale_(optimizer)` first"
    )

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._check(function.calls, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._check(top_level_calls(module), ctx)

    def _check(self, calls: list[F.CallEvent], ctx: Context) -> None:
        scales = [c for c in calls if c.method == "scale" and c.receiver_kind == F.SCALER]
        if not scales:
            return
        unscales = [position(c.node) for c in calls if c.method == "unscale_"]
        for call in calls:
            name = call.method or (call.qualname or "").rsplit(".", 1)[-1]
            if name not in _CLIP or call.receiver in ("accelerator", "fabric", "self"):
                continue
            if not any(p < position(call.node) for p in unscales):
                ctx.report(self, call.node)


_AUTOCASTS = {"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast"}


@rule
class Float16WithoutScaler(Rule):
    """## What it does
    Flags a float16 autocast region in code that trains (calls `backward()`)
    when the file never creates or uses a `GradScaler`.

    ## Why is this bad?
    float16 cannot represent gradients below about 6e-8: small gradients
    underflow to zero and the affected weights stop learning. `GradScaler`
    multiplies the loss to keep them in range. (bfloat16 has float32's range
    and needs no scaler.)

    ## Example
    ```python
    import torch

    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```
    """

    code = "TW110"
    name = "float16-without-grad-scaler"
    family = "training"
    severity = Severity.WARNING
    message = (
        "float16 autocast in a training loop without a GradScaler: "
        "small gradients underflow to zero"
    )

    def __init__(self) -> None:
        self.autocasts: list[tuple[ast.expr, int]] = []  # (context expr, function id)

    def visit_withitem(self, node: ast.withitem, ctx: Context) -> None:
        expr = node.context_expr
        is_autocast = isinstance(expr, ast.Call) and ctx.call_name(expr) in _AUTOCASTS
        if is_autocast and _is_float16(expr, ctx):  # type: ignore[arg-type]
            self.autocasts.append((expr, id(ctx.function) if ctx.function else 0))

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if any(
            c.receiver_kind == F.SCALER or (c.qualname or "").endswith("GradScaler")
            for c in module.calls
        ):
            return
        training = {id(f) for f in module.functions if any(is_tensor_backward(c) for c in f.calls)}
        if any(is_tensor_backward(c) for c in top_level_calls(module)):
            training.add(0)
        for expr, owner in self.autocasts:
            if owner in training:
                ctx.report(self, expr)


def _is_float16(call: ast.Call, ctx: Context) -> bool:
    dtype = keyword(call, "dtype")
    if dtype is not None:
        return ctx.qualname(dtype.value) in {"torch.float16", "torch.half"}
    if ctx.call_name(call) == "torch.cuda.amp.autocast":
        return True
    device = keyword(call, "device_type")
    first = device.value if device is not None else (call.args[0] if call.args else None)
    return isinstance(first, ast.Constant) and first.value == "cuda"
