"""nn.Module definitions (TW12x-TW14x), continued: what ``forward`` does.

``forward`` (and loss functions) run under autograd on whatever device the
model was moved to, every step. These rules flag what skips hooks, leaves
autograd, or lands on the wrong device.

To tell tensors from other values without types, a rule that needs it follows
a function's tensor-valued local names (:class:`TensorNames`): parameters
annotated ``Tensor``, and names assigned from torch functions, submodule calls
(``self.proj(x)``) and tensor methods of those.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.rules._modules import is_module_class, self_attribute
from torchwise.review.rules._tensors import (
    MOVES,
    TENSOR_METHODS,
    produces_tensor,
)

_LOSS_NAME = re.compile(
    r"(^|_)loss(es)?(_fn|_func|_function)?$|^(compute|calc|calculate|get)_\w*loss"
)
_NOT_LOSS = re.compile(r"^_?(log|plot|print|show|report|record|save|update|reset|format)_")


@dataclass
class _Frame:
    role: str | None  # "forward", "loss" or None
    tensors: set[str] = field(default_factory=set)  # names known to hold tensors
    inputs: set[str] = field(default_factory=set)  # unannotated parameters (probably tensors)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


class TensorNames:
    """Mixin: follows tensor-valued names inside forward and loss functions."""

    frames: list[_Frame]

    def __init__(self) -> None:
        self.frames = []

    @property
    def frame(self) -> _Frame | None:
        return self.frames[-1] if self.frames else None

    @property
    def role(self) -> str | None:
        return self.frames[-1].role if self.frames else None

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> None:
        # Runs before the engine enters the function: ctx.scopes[-1] is its parent.
        role = None
        in_class = ctx.scopes[-1].kind == "class" and bool(ctx.classes)
        if in_class and node.name == "forward" and is_module_class(ctx, ctx.classes[-1][0]):
            role = "forward"
        elif _LOSS_NAME.search(node.name) and not _NOT_LOSS.match(node.name):
            role = "loss"
        frame = _Frame(role)
        self.frames.append(frame)
        if role is None:
            return  # names are followed only in forward and loss functions
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
        defaults += args.defaults
        params = [
            *zip(positional, defaults, strict=True),
            *zip(args.kwonlyargs, args.kw_defaults, strict=True),
        ]
        for arg, default in params:
            if arg.arg in {"self", "cls"}:
                continue
            if arg.annotation is not None:
                if "Tensor" in ctx.text(arg.annotation):
                    frame.tensors.add(arg.arg)
            elif role == "forward" and (default is None or _is_none(default)):
                # Inputs of forward are usually tensors; a loss function's may
                # be NumPy arrays (reference implementations), so only annotations count.
                frame.inputs.add(arg.arg)

    visit_AsyncFunctionDef = visit_FunctionDef

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        if self.frames:
            self.frames.pop()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        frame = self.frame
        if frame is None or frame.role is None:
            return
        tensor = self.is_tensor(ctx, node.value, inputs=True)
        for target in node.targets:
            if isinstance(target, ast.Name):
                (frame.tensors.add if tensor else frame.tensors.discard)(target.id)
                frame.inputs.discard(target.id)

    def is_tensor(self, ctx: Context, expr: ast.expr, inputs: bool = False) -> bool:
        """``expr`` clearly holds a tensor (``inputs``: count unannotated parameters)."""
        frame = self.frame
        if frame is None:
            return False
        while True:
            if isinstance(expr, ast.Name):
                return expr.id in frame.tensors or (inputs and expr.id in frame.inputs)
            if isinstance(expr, ast.BinOp):
                return self.is_tensor(ctx, expr.left, inputs) or self.is_tensor(
                    ctx, expr.right, inputs
                )
            if isinstance(expr, ast.Subscript):
                expr = expr.value
                continue
            if not isinstance(expr, ast.Call):
                return False
            if produces_tensor(ctx, expr):
                return True
            func = expr.func
            if not isinstance(func, ast.Attribute):
                return False
            if self_attribute(func) is not None:
                return frame.role == "forward"  # a submodule's output: self.proj(x)
            if func.attr not in TENSOR_METHODS:
                return False
            expr = func.value


def param_like(expr: ast.expr) -> bool:
    """``self.weight``, ``self.conv.bias``, ``self.in_proj_weight``."""
    if not isinstance(expr, ast.Attribute):
        return False
    name = expr.attr
    if name not in {"weight", "bias"} and not name.endswith(("_weight", "_bias")):
        return False
    root: ast.expr = expr
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id == "self"


NUMPY_BREAKERS = {"numpy"}
SCALARS = {"item", "tolist"}


_MOVES_AWAY = MOVES | {"type_as", "to_device"}


def operands_of(ctx: Context, node: ast.Call) -> list[ast.expr]:
    """The other operands of the operator that ``node``'s value flows into,
    through subscripts and tensor methods (``torch.arange(n)[None].float() < y``)."""
    parents: list[ast.AST] = ctx.parents
    child: ast.AST = node
    index = len(parents) - 1
    while index >= 0:
        parent = parents[index]
        if isinstance(parent, ast.Subscript) and parent.value is child:
            child, index = parent, index - 1
            continue
        if isinstance(parent, ast.BinOp):
            other = parent.right if parent.left is child else parent.left
            if isinstance(other, ast.Constant):  # `torch.randn(n) * 0.1` is still that tensor
                child, index = parent, index - 1
                continue
        call = parents[index - 1] if index >= 1 else None
        if isinstance(parent, ast.Attribute) and isinstance(call, ast.Call) and call.func is parent:
            if parent.attr in _MOVES_AWAY or parent.attr not in TENSOR_METHODS:
                return []
            child, index = call, index - 2
            continue
        break
    outer = parents[index] if index >= 0 else None
    if isinstance(outer, ast.BinOp):
        return [outer.right if outer.left is child else outer.left]
    if isinstance(outer, ast.Compare):
        return [operand for operand in (outer.left, *outer.comparators) if operand is not child]
    return []
