"""TW110 float16-without-grad-scaler (training).

The class docstring is its user documentation (`torchwise rules TW110`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._amp import AUTOCASTS, is_float16
from torchwise.review.rules._loops import (
    is_tensor_backward,
    top_level_calls,
)


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
    in_test_modules = False
    message = (
        "float16 autocast in a training loop without a GradScaler: "
        "small gradients underflow to zero"
    )

    def __init__(self) -> None:
        self.autocasts: list[tuple[ast.expr, int]] = []  # (context expr, function id)

    def visit_withitem(self, node: ast.withitem, ctx: Context) -> None:
        expr = node.context_expr
        is_autocast = isinstance(expr, ast.Call) and ctx.call_name(expr) in AUTOCASTS
        if is_autocast and is_float16(expr, ctx):  # type: ignore[arg-type]
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
