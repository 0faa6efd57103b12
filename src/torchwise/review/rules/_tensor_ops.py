"""nn.Module definitions (TW12x-TW14x), continued: tensor operations that
break autograd or raise (moving a leaf, viewing a permuted tensor, ``.data``)."""

from __future__ import annotations

import ast

from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_true, keyword
from torchwise.review.rules._tensors import (
    factory,
)


def grad_factory(ctx: Context, call: ast.Call) -> bool:
    return factory(ctx, call) is not None and is_true(
        getattr(keyword(call, "requires_grad"), "value", None)
    )


def not_to_cpu(move: ast.Call) -> bool:
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


def permutation_of(expr: ast.expr) -> list[int] | None:
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


def view_fails(perm: list[int], args: list[ast.expr]) -> bool:
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


def writes_data(statement: ast.Assign) -> bool:
    for target in statement.targets:
        while isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Attribute) and target.attr == "data":
            return True
    return False


PARAMETER_ITERATORS = {"parameters", "named_parameters"}


def weight_or_grad(expr: ast.expr) -> bool:
    """``m.weight``, ``layer.bias``, ``p.grad``, ``self.in_proj_weight``."""
    if not isinstance(expr, ast.Attribute):
        return False
    name = expr.attr
    return name in {"weight", "bias", "grad"} or name.endswith(("_weight", "_bias"))
