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

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Edit, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._tensors import (
    MOVES,
    TENSOR_METHODS,
    factory,
    passes_device,
    produces_tensor,
)
from torchwise.review.rules._util import (
    keyword,
)
from torchwise.review.rules.modules import creates_module, is_module_class, self_attribute

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


@rule
class ForwardCalledDirectly(Rule):
    """## What it does
    Flags `module.forward(x)` on a model or submodule, instead of `module(x)`.

    ## Why is this bad?
    `nn.Module.__call__` runs the forward pre-hooks and hooks around
    `forward`: calling `forward` directly skips them, so anything that relies
    on hooks (pruning and weight-norm parametrizations, FSDP, activation
    checkpointing wrappers, `torch.utils.hooks`, profilers) silently does not
    happen. `super().forward(x)` and `Base.forward(self, x)` are fine.

    ## Example
    ```python
    from torch import nn

    model = nn.Linear(4, 2)
    y = model.forward(x)
    ```

    ## Use instead
    ```python
    from torch import nn

    model = nn.Linear(4, 2)
    y = model(x)
    ```

    ## Fix safety
    Unsafe: after the fix the module's hooks run, which is the point, but it
    changes what happens when hooks are registered.
    """

    code = "TW124"
    name = "forward-called-directly"
    family = "modules"
    severity = Severity.WARNING
    message = "`{receiver}.forward(...)` skips the module's hooks: call `{receiver}(...)`"
    fix = Applicability.UNSAFE

    def __init__(self) -> None:
        self.modules: set[tuple[str, str]] = set()  # (class, attr) holding a submodule

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if ctx.in_module_class and ctx.classes and len(node.targets) == 1:
            attr = self_attribute(node.targets[0])
            if attr is not None and creates_module(ctx, node.value) == "submodule":
                self.modules.add((ctx.classes[-1][0].name, attr))

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "forward":
            return
        receiver = func.value
        if not isinstance(receiver, (ast.Name, ast.Attribute)):
            return  # super().forward(x)
        if isinstance(receiver, ast.Name) and (
            receiver.id in {"self", "cls"} or receiver.id[:1].isupper()
        ):
            return
        if ctx.qualname(receiver) is not None:
            return  # nn.Linear.forward(self, x): an explicit base-class call
        attr = self_attribute(receiver)
        known = attr is not None and ctx.classes and (ctx.classes[-1][0].name, attr) in self.modules
        if not known and ctx.kind_of(receiver) != F.MODULE:
            return
        text = ctx.text(receiver)
        start, end = ctx.span(func)
        fix = Fix(f"Call `{text}(...)`", (Edit(start, end, text),), Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, receiver=text)


_NUMPY_BREAKERS = {"numpy"}
_SCALARS = {"item", "tolist"}


@rule
class NumpyInForward(TensorNames, Rule):
    """## What it does
    Inside `forward` or a loss function, flags `.numpy()`, NumPy functions
    applied to tensors (`np.exp(x)`), and `.item()`/`.tolist()` whose Python
    number flows back into tensor math (`x * self.scale.item()`,
    `torch.tensor(loss.item())`, `return loss.item()` from a loss).

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
        if func.attr in _NUMPY_BREAKERS and self._attached(ctx, func.value):
            ctx.report(self, node, what="`.numpy()`", where=where)
        elif func.attr in _SCALARS and self._feeds_tensor_math(ctx, node, role):
            ctx.report(self, node, what=f"`.{func.attr}()`", where=where)

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


_MOVES_AWAY = MOVES | {"type_as", "to_device"}


@rule
class FactoryWithoutDevice(TensorNames, Rule):
    """## What it does
    Flags `torch.zeros`, `ones`, `empty`, `full`, `arange`, `linspace`, `eye`,
    `rand`, `randn`, `randint` and `torch.tensor([...])` called in `forward`
    without `device=` whose result meets another tensor of the forward in an
    operator (`x + torch.arange(n)`, `torch.arange(n)[None] < lengths[:, None]`).
    `*_like`/`x.new_*` factories, 0-dim tensors, and creations moved straight
    away (see TW206) are not flagged; nor, for precision, are factories stored
    in a name first (they are often moved later).

    ## Why is this bad?
    Without `device=` the tensor is allocated on the CPU (or the default
    device), whatever device the model was moved to: on a GPU the operation
    fails with `Expected all tensors to be on the same device`.

    ## Example
    ```python
    import torch
    from torch import nn

    class Positions(nn.Module):
        def forward(self, x):
            return x + torch.arange(x.shape[1])
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    class Positions(nn.Module):
        def forward(self, x):
            return x + torch.arange(x.shape[1], device=x.device)
    ```
    """

    code = "TW140"
    name = "factory-without-device"
    family = "modules"
    severity = Severity.WARNING
    message = "`torch.{name}` in `forward` without `device=` is on the CPU, unlike its operand"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not ctx.in_forward or self.role != "forward":
            return
        name = factory(ctx, node)
        if name is None or passes_device(node) or keyword(node, "out"):
            return
        data = node.args[0] if node.args else None
        if name in {"tensor", "as_tensor"}:
            if not isinstance(data, (ast.List, ast.Tuple, ast.ListComp)):
                return  # a 0-dim scalar combines with tensors on any device
        elif isinstance(data, (ast.List, ast.Tuple)) and not data.elts:
            return  # torch.rand([]): 0-dim
        operands = _operands(ctx, node)
        if operands and any(self.is_tensor(ctx, other, inputs=True) for other in operands):
            ctx.report(self, node, name=name)


def _operands(ctx: Context, node: ast.Call) -> list[ast.expr]:
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
