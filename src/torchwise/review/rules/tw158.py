"""TW158 heads-split-without-transpose (modules).

The class docstring is its user documentation (`torchwise rules TW158`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule

_HEADS = re.compile(r"head|n_?h\b|nhead", re.IGNORECASE)
_HEAD_SIZE = re.compile(r"dim|head|d_?k|d_?v|size|hidden|//", re.IGNORECASE)
_REARRANGES = frozenset({"transpose", "permute", "t", "swapaxes", "swapdims", "movedim"})


@rule
class HeadsSplitWithoutTranspose(Rule):
    """## What it does
    Flags multi-head attention code that splits the features of a
    `(batch, seq, heads * head_dim)` tensor into heads with a single `view`
    or `reshape` that puts the heads before the sequence:
    `q.view(batch * heads, -1, head_dim)` or `q.view(batch, heads, -1,
    head_dim)`, on a tensor that no `transpose`/`permute` rearranged first.

    ## Why is this bad?
    `view` only reinterprets memory in order: the features of one position
    are contiguous, so `(batch, seq, heads * head_dim)` read as `(batch,
    heads, seq, head_dim)` makes each "head" a run of `head_dim`-sized chunks
    taken from different positions. Attention then mixes positions and
    feature slices; the model trains, worse, and nothing fails. Split the
    features first, then move the heads: `.view(batch, seq, heads,
    head_dim).transpose(1, 2)`.

    ## Example
    ```python
    def split_heads(q, batch_size, num_heads, head_dim):
        return q.view(batch_size * num_heads, -1, head_dim)
    ```

    ## Use instead
    ```python
    def split_heads(q, batch_size, num_heads, head_dim):
        q = q.view(batch_size, -1, num_heads, head_dim).transpose(1, 2)
        return q.reshape(batch_size * num_heads, -1, head_dim)
    ```
    """

    code = "TW158"
    name = "heads-split-without-transpose"
    family = "modules"
    severity = Severity.WARNING
    message = (
        "`{text}` reads features as heads before the sequence: each head mixes chunks of "
        "different positions; split the last dimension first and move the heads with "
        "`.view(batch, seq, heads, head_dim).transpose(1, 2)`"
    )
    call_methods = frozenset({"view", "reshape"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("view", "reshape"):
            return
        args = node.args
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in args):
            return
        if not (_batch_times_heads(args, ctx) or _heads_second(args, ctx)):
            return
        if _rearranged(func.value, ctx):
            return
        ctx.report(self, node, text=ctx.text(node)[:70])


def _is_minus_one(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and node.operand.value == 1
    )


def _batch_times_heads(args: list[ast.expr], ctx: Context) -> bool:
    """``view(batch * heads, -1, head_dim)``."""
    if len(args) != 3 or not _is_minus_one(args[1]):
        return False
    first = args[0]
    return (
        isinstance(first, ast.BinOp)
        and isinstance(first.op, ast.Mult)
        and _HEADS.search(ctx.text(first)) is not None
        and _HEAD_SIZE.search(ctx.text(args[2])) is not None
        and _HEADS.search(ctx.text(args[2])) is not None
    )


def _heads_second(args: list[ast.expr], ctx: Context) -> bool:
    """``view(batch, heads, -1, head_dim)``."""
    if len(args) != 4 or not _is_minus_one(args[2]):
        return False
    return (
        _HEADS.search(ctx.text(args[1])) is not None
        and "dim" not in ctx.text(args[1]).lower()
        and _HEAD_SIZE.search(ctx.text(args[3])) is not None
    )


def _rearranged(expr: ast.expr, ctx: Context, depth: int = 0) -> bool:
    """Whether a transpose or permute already moved the tensor's dimensions
    (the view then merges or splits what that left, on purpose)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr in _REARRANGES:
            return True
        if expr.func.attr in ("contiguous", "view", "reshape", "float", "to"):
            return _rearranged(expr.func.value, ctx, depth + 1)
        return False
    if isinstance(expr, ast.Name) and depth < 3:
        for parent in reversed(ctx.parents):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in subtree(parent):
                    if (
                        isinstance(node, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
                        and _rearranged(node.value, ctx, depth + 1)
                    ):
                        return True
                break
    return False
