"""TW125 numpy-in-forward (modules).

The class docstring is its user documentation (`torchwise rules TW125`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._forward import NUMPY_BREAKERS, SCALARS, TensorNames, param_like
from torchwise.review.rules._tensors import (
    TENSOR_METHODS,
    factory,
)


@rule
class NumpyInForward(TensorNames, Rule):
    """## What it does
    Inside `forward` or a loss function, flags `.numpy()`, NumPy functions
    applied to tensors (`np.exp(x)`), and `.item()`/`.tolist()` whose Python
    number flows back into tensor math (`x * self.scale.item()`,
    `torch.tensor(loss.item())`, `return loss.item()` from a loss); and in
    `forward`, `.data` of a submodule's output fed back into the computation
    (`torch.cat((x, self.char_lstm(c).data))`): that submodule never trains.

    ## Why is this bad?
    Leaving torch cuts the autograd graph: gradients stop at that point (or
    `.numpy()` raises on a tensor that requires grad), and each call waits for
    the GPU to finish. A loss rebuilt from `.item()` has no `grad_fn`, so
    `backward()` fails or trains nothing. Using `.item()` for control flow or
    shapes is only a sync and is not flagged here.

    ## Example
    ```python
    from torch import nn

    class Scaled(nn.Module):
        def forward(self, x):
            return x * self.scale.item()
    ```

    ## Use instead
    ```python
    from torch import nn

    class Scaled(nn.Module):
        def forward(self, x):
            return x * self.scale
    ```
    """

    code = "TW125"
    name = "numpy-in-forward"
    family = "modules"
    severity = Severity.WARNING
    message = "{what} in {where} leaves autograd: gradients stop here"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        role = self.role
        if role is None or ctx.in_no_grad:
            return
        where = "`forward`" if role == "forward" else "a loss function"
        func = node.func
        qualname = ctx.call_name(node)
        if qualname is not None and qualname.startswith("numpy."):
            if any(self.is_tensor(ctx, arg, inputs=True) for arg in node.args):
                ctx.report(
                    self,
                    node,
                    what=f"`{qualname.replace('numpy', 'np', 1)}` on a tensor",
                    where=where,
                )
            return
        if not isinstance(func, ast.Attribute) or node.args or node.keywords:
            return
        if func.attr in NUMPY_BREAKERS and self._attached(ctx, func.value):
            ctx.report(self, node, what="`.numpy()`", where=where)
        elif func.attr in SCALARS and self._feeds_tensor_math(ctx, node, role):
            ctx.report(self, node, what=f"`.{func.attr}()`", where=where)

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        """``self.encoder(x).data`` fed back into ``forward``'s computation: the
        submodule is cut off the graph and never trains."""
        if node.attr != "data" or not isinstance(node.ctx, ast.Load):
            return
        if self.role != "forward" or ctx.in_no_grad:
            return
        value = ctx.value_of(node.value)
        if value is None or value.kind != F.OUTPUT:
            return
        parts = sorted(name for name in value.through if name.startswith("self."))
        if not parts or not _feeds_computation(ctx):
            return
        ctx.report(
            self,
            node,
            message="`.data` of `{part}`'s output in `forward` cuts it from the graph: "
            "`{part}` never receives a gradient; use the tensor itself",
            part=parts[0],
        )

    def _attached(self, ctx: Context, receiver: ast.expr) -> bool:
        """A graph-carrying tensor (a submodule output, a parameter) not detached
        on the way: ``.numpy()`` raises on it while gradients are enabled."""
        while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute):
            if receiver.func.attr in {"detach", "detach_", "item", "tolist"}:
                return False
            if receiver.func.attr not in TENSOR_METHODS:
                break
            receiver = receiver.func.value
        return param_like(receiver) or self.is_tensor(ctx, receiver)

    def _feeds_tensor_math(self, ctx: Context, node: ast.Call, role: str) -> bool:
        parents = ctx.parents
        parent = parents[-1] if parents else None
        if isinstance(parent, (ast.List, ast.Tuple)) and len(parents) >= 2:
            parent = parents[-2]
        if isinstance(parent, ast.Call) and factory(ctx, parent) is not None:
            return node in parent.args or isinstance(parents[-1], (ast.List, ast.Tuple))
        if isinstance(parent, ast.BinOp) and isinstance(
            parent.op, (ast.Mult, ast.Div, ast.Add, ast.Sub, ast.Pow)
        ):
            other = parent.right if parent.left is node else parent.left
            return self.is_tensor(ctx, other, inputs=True)
        return isinstance(parent, ast.Return) and role == "loss"


def _feeds_computation(ctx: Context) -> bool:
    """Whether the expression being visited is an operand of tensor math: in
    ``torch.cat((a, b.data))``, ``a + b.data``, ``layer(b.data)``."""
    parents = ctx.parents
    parent = parents[-1] if parents else None
    if isinstance(parent, (ast.List, ast.Tuple)) and len(parents) >= 2:
        parent = parents[-2]
    if isinstance(parent, ast.BinOp):
        return True
    if isinstance(parent, ast.Call):
        name = ctx.call_name(parent) or ""
        return name.startswith("torch.") or ctx.kind_of(parent.func) == F.MODULE
    return False
