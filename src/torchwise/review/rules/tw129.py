"""TW129 view-after-permute (modules).

The class docstring is its user documentation (`torchwise rules TW129`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._tensor_ops import permutation_of, view_fails


@rule
class ViewAfterPermute(Rule):
    """## What it does
    Flags `.view(...)` on a tensor that is not contiguous when the sizes it
    is given merge dimensions whose strides no longer line up:
    `x.permute(0, 2, 1, 3).view(b, t, -1)`, `.view(b, t, h * d)`; and a
    flattening `.view(-1)` (or `.view(n, -1)` merging the moved dimensions) of
    a transpose (`.t()`, `.transpose(i, j)`, `.mT`, `.swapaxes`), of a slice
    that cuts a dimension after the first (`x[:, :k]`), or of a name bound to
    one of these in the same function (`w = weight.t()` then
    `w[:k].view(-1)`). Views that only split dimensions work and are not
    flagged, nor are views of a transpose whose merge cannot be read from the
    sizes given.

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

    call_methods = frozenset({"view"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "view" or node.keywords:
            return
        end = ctx.span(func)[1]
        fix = Fix("Use `.reshape()`", (Edit(end - len("view"), end, "reshape"),))
        perm = permutation_of(func.value)
        if perm is not None:
            if view_fails(perm, node.args):
                ctx.report(self, node, fix=fix)
            return
        made = _non_contiguous(func.value, ctx, 0)
        if made is not None and _flattens(node.args):
            message = (
                f"`.view()` flattens a tensor that {made} left non-contiguous: it raises "
                "'view size is not compatible with input tensor's size and stride'; use "
                "`.reshape()` (or `.contiguous()` first)"
            )
            ctx.report(self, node, fix=fix, message=message)


_TRANSPOSES = frozenset({"t", "transpose", "swapaxes", "swapdims", "mT", "T"})


def _non_contiguous(expr: ast.expr, ctx: Context, depth: int) -> str | None:
    """What made ``expr`` non-contiguous (``"`.t()` on line 3"``), if the code shows it."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr in _TRANSPOSES and (expr.func.attr != "transpose" or len(expr.args) == 2):
            return f"`.{expr.func.attr}()` on line {expr.lineno}"
        if expr.func.attr == "contiguous":
            return None
    if isinstance(expr, ast.Attribute) and expr.attr in ("mT", "T"):
        return f"`.{expr.attr}` on line {expr.lineno}"
    if isinstance(expr, ast.Subscript):
        inner = _non_contiguous(expr.value, ctx, depth + 1)
        if inner is not None:
            return inner
        index = expr.slice
        if isinstance(index, ast.Tuple) and any(
            isinstance(item, ast.Slice) and (item.lower is not None or item.upper is not None)
            for item in index.elts[1:]
        ):
            return f"the slice `{ctx.text(expr)[:40]}` on line {expr.lineno}"
        return None
    if isinstance(expr, ast.Name) and depth < 3:
        bound = _bound_once(expr.id, ctx)
        if bound is not None:
            return _non_contiguous(bound, ctx, depth + 1)
    return None


def _bound_once(name: str, ctx: Context) -> ast.expr | None:
    """The value of the one assignment to ``name`` in the enclosing function."""
    scope: ast.AST | None = next(
        (
            p
            for p in reversed(ctx.parents)
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))
        ),
        None,
    )
    if scope is None:
        return None
    values = [
        node.value
        for node in subtree(scope)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == name
    ]
    stored = sum(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
        for node in subtree(scope)
    )
    return values[0] if len(values) == 1 and stored == 1 else None


def _flattens(args: list[ast.expr]) -> bool:
    """``view(-1)`` or ``view(n * m)``: every dimension merged into one."""
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    if len(args) != 1 or isinstance(args[0], ast.Starred):
        return False
    only = args[0]
    if isinstance(only, ast.UnaryOp) and isinstance(only.op, ast.USub):
        return isinstance(only.operand, ast.Constant) and only.operand.value == 1
    return isinstance(only, ast.BinOp) and isinstance(only.op, ast.Mult)
