"""Numerics (TW501, TW503-TW507): compositions with a numerically stable spelling.

Helpers shared by the TW501 and TW503-TW507 rule modules. The log rules follow
the value model: ``torch.log(F.softmax(x, 1))`` and ``probs.log()`` where
``probs`` holds a softmax (assigned earlier, returned by a project function,
a model's output that ends in one) are the same composition; a softmax made
safe first (``p + eps``, ``p.clamp(min=eps)``) is not.
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix
from torchwise.review.engine.context import Context
from torchwise.review.rules._numerics import producer

LOGS = {"torch.log", "math.log", "numpy.log"}
EXPS = {"torch.exp", "math.exp", "numpy.exp"}
LOG_SOFTMAX_NAMES = {"softmax": "log_softmax", "Softmax": "LogSoftmax"}


def single_argument(call: ast.Call) -> ast.expr | None:
    if len(call.args) == 1 and not call.keywords and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    return None


def logged_argument(node: ast.Call, ctx: Context) -> ast.expr | None:
    """``x`` of ``torch.log(x)`` or ``x.log()``."""
    if ctx.call_name(node) == "torch.log":
        return single_argument(node)
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr != "log" or node.args or node.keywords:
        return None
    if ctx.qualname(func) is not None:
        return None  # `math.log` without arguments: not a tensor's method
    return func.value


def activation_held(expr: ast.expr, log: ast.Call, ctx: Context) -> tuple[str, int | None] | None:
    """(activation, line) when ``expr`` is not a direct call but holds a softmax or
    sigmoid output: a name assigned one, a project function returning one, a
    model whose output ends in one. Not in an entropy, ``p * log(p)``, written
    over stored probabilities on purpose (it needs the probabilities anyway)."""
    if isinstance(expr, ast.Call) and producer(expr, ctx) is not None:
        return None  # a direct call: the caller's own pattern
    parent = ctx.parent
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult):
        other = parent.right if parent.left is log else parent.left
        if ctx.dotted(other) is not None and ctx.dotted(other) == ctx.dotted(expr):
            return None
    value = ctx.value_of(expr)
    if value is None or value.activation is None:
        return None
    at = value.activation_at
    return value.activation, (at[1] if at is not None and at[0] is None else None)


def unwrap(ctx: Context, outer: ast.Call, inner: ast.Call, rename: Edit, title: str) -> Fix:
    """Replace ``outer`` by ``inner`` with one name changed (``rename``)."""
    outer_start, outer_end = ctx.span(outer)
    inner_start, inner_end = ctx.span(inner)
    edits = (Edit(outer_start, inner_start, ""), rename, Edit(inner_end, outer_end, ""))
    return Fix(title, edits, Applicability.SAFE)


def is_one(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and type(node.value) in (int, float)
        and node.value == 1  # 1 or 1.0; not True
    )


NORMS = {"torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm", "torch.std"}


def statistic_of(
    expr: ast.expr, ctx: Context, methods: set[str], functions: set[str]
) -> str | None:
    """``norm``/``std``/``var`` when ``expr`` is a direct call of one, else None."""
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    qualname = ctx.qualname(func)
    if qualname is not None:
        return qualname.rsplit(".", 1)[-1] if qualname in functions else None
    if not isinstance(func, ast.Attribute) or func.attr not in methods:
        return None
    if ctx.dotted(func.value) in {"self", "cls"}:
        return None  # self.norm(x): a normalisation layer, not Tensor.norm
    if func.attr == "norm" and not all(
        isinstance(a, (ast.Constant, ast.UnaryOp)) for a in expr.args
    ):
        return None  # block.norm(x) is a layer; Tensor.norm's positional is the order p
    return func.attr
