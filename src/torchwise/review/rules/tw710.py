"""TW710 backward-gradient-shape (tensors).

The class docstring is its user documentation (`torchwise rules TW710`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.tensors import Dim
from torchwise.review.registry import Rule, rule


@rule
class BackwardGradientShape(Rule):
    """## What it does
    Flags `out.backward(gradient)` (and `torch.autograd.backward(out, grad)`)
    where the shapes of `out` and `gradient` are both known and differ: the
    classic case is `one = torch.FloatTensor([1])` given as the gradient of a
    0-dim mean (`D_real.backward(mone)` in WGAN code from PyTorch 0.3).

    ## Why is this bad?
    The gradient must have the shape of the output: backward raises
    `RuntimeError: Mismatch in shape: grad_output[0] has a shape of
    torch.Size([1]) and output[0] has a shape of torch.Size([])` (PyTorch
    stopped accepting the mismatch years ago).

    ## Example
    ```python
    import torch

    mone = torch.FloatTensor([-1])
    loss = torch.randn(4, requires_grad=True).mean()
    loss.backward(mone)
    ```

    ## Use instead
    ```python
    import torch

    mone = torch.tensor(-1.0)
    loss = torch.randn(4, requires_grad=True).mean()
    loss.backward(mone)  # or (-loss).backward()
    ```
    """

    code = "TW710"
    name = "backward-gradient-shape"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = (
        "`{output}` has shape {output_shape} but the gradient `{gradient}` has shape "
        "{gradient_shape}: backward raises 'Mismatch in shape'"
    )
    call_methods = frozenset({"backward"})
    call_names = frozenset({"torch.autograd.backward"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        given = next(
            (item.value for item in node.keywords if item.arg in {"gradient", "grad_tensors"}), None
        )
        if ctx.call_name(node) == "torch.autograd.backward":
            output = node.args[0] if node.args else None
            gradient = node.args[1] if len(node.args) > 1 else given
        elif isinstance(func, ast.Attribute) and func.attr == "backward":
            output = func.value
            gradient = node.args[0] if node.args else given
        else:
            return
        if output is None or gradient is None:
            return
        out, grad = ctx.tensor_of(output), ctx.tensor_of(gradient)
        if out is None or grad is None or out.container or grad.container:
            return
        if out.dims is None or grad.dims is None or _compatible(out.dims, grad.dims):
            return
        made = ctx.value_of(gradient)
        line = getattr(None if made is None else made.node, "lineno", None)
        ctx.report(
            self,
            node,
            gradient_line="" if line is None else str(line),
            output=ctx.text(output),
            gradient=ctx.text(gradient),
            output_shape=_shown(out.dims),
            gradient_shape=_shown(grad.dims),
        )


def _compatible(left: tuple[Dim, ...], right: tuple[Dim, ...]) -> bool:
    """Same rank, and no pair of sizes known to differ."""
    if len(left) != len(right):
        return False
    return all(
        a is None or b is None or a == b or isinstance(a, str) or isinstance(b, str)
        for a, b in zip(left, right, strict=True)
    )


def _shown(dims: tuple[Dim, ...]) -> str:
    if not dims:
        return "() (0-dim)"
    return (
        "("
        + ", ".join("?" if d is None else str(d) for d in dims)
        + (",)" if len(dims) == 1 else ")")
    )
