"""nn.Module definitions (TW12x-TW14x), continued: what ``forward`` does.

``forward`` (and loss functions) run under autograd on whatever device the
model was moved to, every step. These rules flag what breaks the graph, skips
hooks, lands on the wrong device, or ignores ``self.training``.

To tell tensors from other values without types, each rule that needs it
follows a function's tensor-valued local names: parameters annotated
``Tensor``, and names assigned from torch functions, submodule calls
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
    chained_method,
    factory,
    move_into_factory,
    move_target,
    passes_device,
    produces_tensor,
)
from torchwise.review.rules._util import add_keyword, has_kwargs_splat, is_true, keyword
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


class _TensorNames:
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
class NumpyInForward(_TensorNames, Rule):
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
        return _param_like(receiver) or self.is_tensor(ctx, receiver)

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


@rule
class RequiresGradThenMoved(Rule):
    """## What it does
    Flags a tensor created with `requires_grad=True` and then moved or
    converted (`.to(device)`, `.cuda()`, `.double()`), chained on the creation
    call or by reassigning the name (`w = w.to(device)`).

    ## Why is this bad?
    The move is an autograd operation: its result is a *non-leaf* tensor, so
    after `backward()` its `.grad` stays `None` (the gradient lands on the
    unreachable CPU original), and an optimizer given it never updates it.

    ## Example
    ```python
    import torch

    w = torch.randn(10, 10, requires_grad=True).to(device)
    ```

    ## Use instead
    ```python
    import torch

    w = torch.randn(10, 10, device=device, requires_grad=True)
    ```

    ## Fix safety
    Unsafe: creating the tensor on the device makes it the leaf you meant, but
    random factories draw different numbers on another device's generator.
    """

    code = "TW126"
    name = "requires-grad-then-moved"
    family = "modules"
    severity = Severity.ERROR
    message = "`.{move}()` makes this `requires_grad` tensor a non-leaf: its `.grad` stays None"
    fix = Applicability.UNSAFE

    def __init__(self) -> None:
        self.leaves: list[set[str]] = [set()]  # per function: names holding such tensors

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> None:
        self.leaves.append(set())

    visit_AsyncFunctionDef = visit_FunctionDef

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self.leaves.pop()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        value, leaves = node.value, self.leaves[-1]
        names = [dotted for t in node.targets if (dotted := ctx.dotted(t)) is not None]
        if isinstance(value, ast.Call) and _grad_factory(ctx, value):
            leaves.update(names)
            return
        # `w = w.to(device)`: the name now holds the non-leaf copy.
        func = value.func if isinstance(value, ast.Call) else None
        if isinstance(value, ast.Call) and isinstance(func, ast.Attribute) and func.attr in MOVES:
            moved = ctx.dotted(func.value)
            if moved in leaves and moved in names and _not_to_cpu(value):
                ctx.report(self, value, move=func.attr)
        leaves.difference_update(names)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not _grad_factory(ctx, node):
            return
        move = chained_method(ctx, node)
        if move is None or not isinstance(move.func, ast.Attribute) or move.func.attr not in MOVES:
            return
        if not _not_to_cpu(move):
            return
        parents = ctx.parents
        wrapper = parents[-3] if len(parents) >= 3 else None
        if isinstance(wrapper, ast.Call) and creates_module(ctx, wrapper) == "parameter":
            return  # nn.Parameter(...) makes a new leaf
        device = move_target(ctx, move)
        fix = None
        if device is not None:
            fix = move_into_factory(ctx, node, move, device, Applicability.UNSAFE)
        ctx.report(self, move, fix=fix, move=move.func.attr)


def _grad_factory(ctx: Context, call: ast.Call) -> bool:
    return factory(ctx, call) is not None and is_true(
        getattr(keyword(call, "requires_grad"), "value", None)
    )


def _not_to_cpu(move: ast.Call) -> bool:
    """``.to("cpu")``/``.cpu()`` on a CPU tensor returns the tensor itself."""
    assert isinstance(move.func, ast.Attribute)
    if move.func.attr == "cpu":
        return False
    first = move.args[0] if move.args else getattr(keyword(move, "device"), "value", None)
    return not (isinstance(first, ast.Constant) and first.value == "cpu")


def _int(node: ast.expr) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _permutation(expr: ast.expr) -> list[int] | None:
    """``[0, 2, 1, 3]`` for ``x.permute(0, 2, 1, 3)`` (literal dims), else None."""
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute):
        return None
    args = expr.args
    if expr.func.attr != "permute" or expr.keywords or not args:
        return None
    items = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) else args
    dims = [_int(item) for item in items]
    rank = len(dims)
    if rank < 2 or any(dim is None for dim in dims):
        return None
    perm = [dim % rank for dim in dims if dim is not None]
    return perm if sorted(perm) == list(range(rank)) else None


def _factors(node: ast.expr) -> int:
    """How many dimensions a ``view`` size stands for: 2 for ``h * d``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return 1


def _view_fails(perm: list[int], args: list[ast.expr]) -> bool:
    """Whether ``view(*args)`` must merge dimensions the permutation moved apart.

    Splitting a dimension works on any strides; merging needs the merged
    dimensions consecutive in the original (contiguous) order. The rank is the
    permutation's length, so the merges can be read from the sizes: ``h * d``
    stands for two dimensions, one ``-1`` for whatever is left, a single size
    for all of them. Sizes that do not add up to the rank say nothing.
    """
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    if not args or any(isinstance(arg, ast.Starred) for arg in args):
        return False
    rank = len(perm)
    if len(args) == 1:  # flatten; a single name may be a dtype (x.view(torch.int8))
        if _int(args[0]) is None and not isinstance(args[0], ast.BinOp):
            return False
        sizes = [rank]
    else:
        counted = [None if _int(arg) == -1 else _factors(arg) for arg in args]
        known = sum(size or 0 for size in counted)
        if counted.count(None) > 1 or (None in counted and known >= rank):
            return False
        sizes = [rank - known if size is None else size for size in counted]
    if sum(sizes) != rank:
        return False
    position = 0
    for size in sizes:
        group = perm[position : position + size]
        if group != list(range(group[0], group[0] + size)):
            return True
        position += size
    return False


@rule
class ViewAfterPermute(Rule):
    """## What it does
    Flags `.view(...)` applied directly to `.permute(...)` when the sizes it is
    given merge dimensions that the permutation moved apart
    (`x.permute(0, 2, 1, 3).view(b, t, -1)`, `.view(b, t, h * d)`,
    `.view(-1)`). Views that only split dimensions work and are not flagged,
    nor are views after `.transpose()` or `.t()`, whose rank (and so whether
    a merge happens) cannot be read from the source.

    ## Why is this bad?
    The permuted tensor is not contiguous, and `view` cannot merge dimensions
    whose strides no longer line up: it raises `RuntimeError: view size is not
    compatible with input tensor's size and stride` (unless the merged sizes
    happen to be 1, or the input had an unusual memory format).

    ## Example
    ```python
    out = attn.permute(0, 2, 1, 3).view(batch, seq, heads * dim)
    ```

    ## Use instead
    ```python
    out = attn.permute(0, 2, 1, 3).reshape(batch, seq, heads * dim)
    ```

    ## Fix safety
    Safe: `reshape` returns a view whenever `view` would have succeeded, and
    copies only where `view` raises.
    """

    code = "TW129"
    name = "view-after-permute"
    family = "modules"
    severity = Severity.WARNING
    message = "`.view()` merges dimensions `.permute()` made non-contiguous: use `.reshape()`"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "view" or node.keywords:
            return
        perm = _permutation(func.value)
        if perm is None or not _view_fails(perm, node.args):
            return
        end = ctx.span(func)[1]
        fix = Fix("Use `.reshape()`", (Edit(end - len("view"), end, "reshape"),))
        ctx.report(self, node, fix=fix)


def _writes_data(statement: ast.Assign) -> bool:
    for target in statement.targets:
        while isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Attribute) and target.attr == "data":
            return True
    return False


def _param_like(expr: ast.expr) -> bool:
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
class DataAttribute(_TensorNames, Rule):
    """## What it does
    Inside `forward` or a loss function, flags `.data` on a parameter
    (`self.weight.data`) or on a tensor computed there.

    ## Why is this bad?
    `.data` returns the same storage with autograd detached, and without the
    version-counter checks that `.detach()` keeps: whatever is computed from
    it gets no gradient, so the parameter silently stops training, and an
    in-place change to it corrupts gradients without an error. Outside the
    graph (weight initialisation under `torch.no_grad()`) it is legacy style
    but harmless, and not flagged.

    ## Example
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Scaled(nn.Linear):
        def forward(self, x):
            return F.linear(x, self.weight.data * 2)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Scaled(nn.Linear):
        def forward(self, x):
            return F.linear(x, self.weight * 2)
    ```
    """

    code = "TW131"
    name = "data-attribute"
    family = "modules"
    severity = Severity.WARNING
    message = "`{base}.data` in {where} bypasses autograd: use the tensor (or `.detach()`)"

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        if node.attr != "data" or not isinstance(node.ctx, ast.Load):
            return
        role = self.role
        if role is None or ctx.in_no_grad:
            return
        base = node.value
        if not (_param_like(base) or self.is_tensor(ctx, base)):
            return
        parents = ctx.parents
        parent = parents[-1] if parents else None
        if isinstance(parent, ast.Attribute) and parent.attr in {"detach", "clone", "copy_"}:
            return  # `.data.detach()`: detached on purpose
        if any(isinstance(p, ast.Assign) and _writes_data(p) for p in parents):
            return  # `new.weight.data[:n] = old.weight.data`: weight surgery, not math
        where = "`forward`" if role == "forward" else "a loss function"
        ctx.report(self, node, base=ctx.text(base), where=where)


_FUNCTIONAL_DROPOUT = {
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


@rule
class FunctionalDropoutTraining(Rule):
    """## What it does
    Flags `F.dropout(...)` (and `dropout1d/2d/3d`, `alpha_dropout`,
    `feature_alpha_dropout`) in a method of an `nn.Module` without a
    `training=` argument, outside an `if self.training:` guard.

    ## Why is this bad?
    Unlike `nn.Dropout`, the functional form does not know the module's mode:
    `training` defaults to `True`, so dropout stays on after `model.eval()`
    and evaluation results are random and worse.

    ## Example
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def forward(self, x):
            return F.dropout(self.proj(x), p=0.1)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def forward(self, x):
            return F.dropout(self.proj(x), p=0.1, training=self.training)
    ```

    ## Fix safety
    Unsafe: it turns dropout off in eval mode, which changes evaluation
    outputs (to the ones you meant).
    """

    code = "TW133"
    name = "functional-dropout-always-on"
    family = "modules"
    severity = Severity.ERROR
    message = "`{func}` without `training=self.training` stays on in eval mode"
    fix = Applicability.UNSAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in _FUNCTIONAL_DROPOUT or not ctx.in_module_class:
            return
        if keyword(node, "training") or has_kwargs_splat(node) or len(node.args) >= 3:
            return
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            return
        for parent in ctx.parents:  # `if self.training:` / `... if self.training else x`
            if isinstance(parent, (ast.If, ast.IfExp)) and "training" in ctx.text(parent.test):
                return
        function = ctx.function
        first = function.node.args.args[0].arg if function and function.node.args.args else ""  # type: ignore[attr-defined]
        fix = None
        if first == "self":
            edit = add_keyword(ctx, node, "training=self.training")
            fix = Fix("Pass `training=self.training`", (edit,), Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, func="F." + qualname.rsplit(".", 1)[-1])


_PARAMETRIZED_LAYERS = {
    f"torch.nn.{name}"
    for name in (
        "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
        "ConvTranspose3d", "Embedding", "EmbeddingBag", "BatchNorm1d", "BatchNorm2d",
        "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "LSTM", "GRU", "RNN", "LSTMCell",
        "GRUCell", "RNNCell", "MultiheadAttention", "PReLU", "Transformer",
        "TransformerEncoderLayer", "TransformerDecoderLayer",
    )
}  # fmt: skip


@rule
class LayerCreatedInForward(Rule):
    """## What it does
    Flags an `nn.Parameter` or a layer with weights (`nn.Linear`, `nn.Conv2d`,
    `nn.LayerNorm`, ...) constructed inside `forward`, outside an `if` (the
    lazy-initialisation pattern) and not stored on `self`.

    ## Why is this bad?
    A layer built in `forward` gets fresh random weights on every call, and
    neither it nor a parameter made there is in `model.parameters()` when the
    optimizer is built: the output is noise and nothing learns.

    ## Example
    ```python
    from torch import nn

    class Head(nn.Module):
        def forward(self, x):
            return nn.Linear(x.shape[-1], 10)(x)
    ```

    ## Use instead
    ```python
    from torch import nn

    class Head(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, 10)

        def forward(self, x):
            return self.proj(x)
    ```
    """

    code = "TW136"
    name = "layer-created-in-forward"
    family = "modules"
    severity = Severity.ERROR
    message = "`{layer}` created in `forward` is re-initialised every call and never trained"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not ctx.in_forward:
            return
        qualname = ctx.call_name(node)
        kind = creates_module(ctx, node)
        if kind != "parameter" and qualname not in _PARAMETRIZED_LAYERS:
            return
        parents = ctx.parents
        if any(isinstance(parent, (ast.If, ast.IfExp, ast.Try)) for parent in parents):
            return  # lazy initialisation: `if self.proj is None: self.proj = nn.Linear(...)`
        statement = parents[-1] if parents else None
        if isinstance(statement, ast.Assign) and any(
            self_attribute(target) for target in statement.targets
        ):
            return
        ctx.report(self, node, layer="nn." + (qualname or "").rsplit(".", 1)[-1])


_MOVES_AWAY = MOVES | {"type_as", "to_device"}


@rule
class FactoryWithoutDevice(_TensorNames, Rule):
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
