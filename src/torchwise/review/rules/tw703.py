"""TW703 tensor-move-discarded (tensors).

The class docstring is its user documentation (`torchwise rules TW703`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.inputs import DTYPE_WORDS
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

_TENSORS = (F.TENSOR, F.OUTPUT, F.LOSS, F.TENSORS)
_MOVES = {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "long", "int", "type"}


@rule
class TensorMoveDiscarded(Rule):
    """## What it does
    Flags `t.to(device)`, `t.cuda()`, `t.cpu()`, `t.float()` and the other
    conversions written as a statement on a value known to be a tensor (a
    batch of a loader, a model's output, a tensor a factory built), so that
    their result is thrown away. A discarded dtype conversion alone
    (`t.to(torch.float16)`) is a warning: it is a no-op when the tensor has that
    dtype already.

    ## Why is this bad?
    A module's `.to()` moves it in place; a tensor's returns a moved copy and
    leaves the tensor where it was. The batch stays on the CPU and the model
    call that follows fails on a GPU (or the conversion silently never
    happens).

    ## Example
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.randn(8, 4)
    x.to(device)
    ```

    ## Use instead
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.randn(8, 4)
    x = x.to(device)
    ```
    """

    code = "TW703"
    name = "tensor-move-discarded"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = "`{call}` returns a new tensor and leaves `{name}` unchanged: assign the result"

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> None:
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            return
        if call.func.attr not in _MOVES:
            return
        value = ctx.value_of(call.func.value)
        if value is None or value.kind not in _TENSORS or "guessed" in value.flags:
            return  # known from its name only (`loss`) it may be a loss module
        ctx.report(
            self,
            call,
            call=ctx.text(call),
            name=ctx.text(call.func.value),
            # a discarded dtype conversion is often a no-op (the tensor has that dtype)
            severity=None if _moves_device(call) else Severity.WARNING,
        )


def _moves_device(call: ast.Call) -> bool:
    """``.cuda()``, ``.cpu()``, ``.to(device)``: not only a dtype conversion."""
    method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if method in {"cuda", "cpu"}:
        return True
    if method != "to":
        return False
    given = [*call.args, *(k.value for k in call.keywords if k.arg in {"device", "dtype"})]
    return not all(_names_a_dtype(ast.unparse(arg)) for arg in given)


def _names_a_dtype(text: str) -> bool:
    """``torch.float32``, ``weight_dtype``, ``x.dtype``: a dtype, not a device."""
    return "dtype" in text or text.rsplit(".", 1)[-1] in DTYPE_WORDS
