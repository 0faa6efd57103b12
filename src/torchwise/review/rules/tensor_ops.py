"""nn.Module definitions (TW12x-TW14x), continued: tensor operations that
break autograd or raise (moving a leaf, viewing a permuted tensor, ``.data``)."""

from __future__ import annotations

import ast

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Edit, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._tensors import (
    MOVES,
    chained_method,
    factory,
    move_into_factory,
    move_target,
)
from torchwise.review.rules._util import (
    is_true,
    keyword,
)
from torchwise.review.rules.forward import TensorNames, param_like
from torchwise.review.rules.modules import creates_module


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


@rule
class DataAttribute(TensorNames, Rule):
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
        if not (param_like(base) or self.is_tensor(ctx, base)):
            return
        parents = ctx.parents
        parent = parents[-1] if parents else None
        if isinstance(parent, ast.Attribute) and parent.attr in {"detach", "clone", "copy_"}:
            return  # `.data.detach()`: detached on purpose
        if any(isinstance(p, ast.Assign) and _writes_data(p) for p in parents):
            return  # `new.weight.data[:n] = old.weight.data`: weight surgery, not math
        where = "`forward`" if role == "forward" else "a loss function"
        ctx.report(self, node, base=ctx.text(base), where=where)


_PARAMETER_ITERATORS = {"parameters", "named_parameters"}


@rule
class LegacyDataAttribute(Rule):
    """## What it does
    Outside `forward` and loss functions (where TW131 reports it as a bug),
    flags `.data` on parameters and gradients: `p.data` for a `p` from
    `model.parameters()`/`named_parameters()`, `module.weight.data`,
    `p.grad.data`.

    ## Why is this bad?
    `.data` is the pre-0.4 way to step outside autograd. It skips the version
    counter, so an in-place change through it to a tensor that autograd saved
    for `backward()` silently corrupts the gradients instead of raising.
    `torch.no_grad()` (or `nn.init`, or `.detach()`) says the same thing with
    the checks kept.

    ## Example
    ```python
    for p in model.parameters():
        p.data.add_(p.grad.data, alpha=-lr)
    ```

    ## Use instead
    ```python
    import torch

    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)
    ```
    """

    code = "TW132"
    name = "legacy-data-attribute"
    family = "modules"
    severity = Severity.INFO
    default_enabled = False
    message = "`{base}.data` skips autograd's checks: use `torch.no_grad()` or `.detach()`"

    def __init__(self) -> None:
        self.parameters: set[str] = set()  # loop variables over .parameters()

    def visit_For(self, node: ast.For, ctx: Context) -> None:
        it = node.iter
        if not isinstance(it, ast.Call) or not isinstance(it.func, ast.Attribute):
            return
        if it.func.attr not in _PARAMETER_ITERATORS:
            return
        target = node.target
        if isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[1]  # for name, p in model.named_parameters()
        if isinstance(target, ast.Name):
            self.parameters.add(target.id)

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        if node.attr != "data" or ctx.in_forward:
            return
        base = node.value
        parameter = isinstance(base, ast.Name) and base.id in self.parameters
        if parameter or _weight_or_grad(base):
            ctx.report(self, node, base=ctx.text(base))


def _weight_or_grad(expr: ast.expr) -> bool:
    """``m.weight``, ``layer.bias``, ``p.grad``, ``self.in_proj_weight``."""
    if not isinstance(expr, ast.Attribute):
        return False
    name = expr.attr
    return name in {"weight", "bias", "grad"} or name.endswith(("_weight", "_bias"))
