"""Deprecated APIs (TW402, TW406-TW409): tensor functions and types PyTorch replaced.

Helpers shared by the TW402 and TW406-TW409 rule modules. The list follows
PyTorch's own deprecation notices (the names TorchFix tracks in its
``deprecated_symbols.yaml``, checked against torch 2.13). Fixes are offered only
where the replacement is provably the same computation: for
``torch.norm`` that is the branch of its implementation that calls
``torch.linalg.vector_norm`` itself.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

from torchwise.findings import Fix
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import constant, keyword
from torchwise.review.rules._util import rename_attribute, replace

REMOVED = {
    "torch.solve": "torch.linalg.solve(A, B)` (arguments swapped",
    "torch.lstsq": "torch.linalg.lstsq(A, B)` (arguments swapped",
    "torch.symeig": "torch.linalg.eigh` (or `eigvalsh`",
    "torch.eig": "torch.linalg.eig` (complex results",
    "torch.matrix_rank": "torch.linalg.matrix_rank` (same arguments",
}


def torch_prefix(call: ast.Call, ctx: Context) -> str | None:
    """``torch`` (or ``T``) when the call is ``torch.<name>(...)``: the text to reuse."""
    func = call.func
    if isinstance(func, ast.Attribute) and ctx.qualname(func.value) == "torch":
        return ctx.text(func.value)
    return None


def plain_args(call: ast.Call) -> bool:
    return not any(isinstance(arg, ast.Starred) for arg in call.args) and not any(
        item.arg is None for item in call.keywords
    )


DEPRECATED = {
    "torch.norm": "torch.linalg.vector_norm` or `torch.linalg.matrix_norm",
    "torch.chain_matmul": "torch.linalg.multi_dot",
    "torch.qr": "torch.linalg.qr",
    "torch.cholesky": "torch.linalg.cholesky",
    "torch.ger": "torch.outer",
    "torch.lu": "torch.linalg.lu_factor",
    "torch.lu_solve": "torch.linalg.lu_solve",
    "torch.triangular_solve": "torch.linalg.solve_triangular",
    "torch.svd": "torch.linalg.svd",
}


def _fix_ger(node: ast.Call, prefix: str, ctx: Context) -> str | None:
    assert isinstance(node.func, ast.Attribute)
    start, end = ctx.span(node)
    edit = rename_attribute(ctx, node.func, "outer")
    return ctx.source[start : edit.start] + "outer" + ctx.source[edit.end : end]


def _fix_chain_matmul(node: ast.Call, prefix: str, ctx: Context) -> str | None:
    if len(node.args) < 2 or node.keywords:
        return None  # one matrix is returned as is (multi_dot refuses it); out= differs
    matrices = ", ".join(ctx.text(arg) for arg in node.args)
    return f"{prefix}.linalg.multi_dot([{matrices}])"


def _fix_qr(node: ast.Call, prefix: str, ctx: Context) -> str | None:
    some = keyword(node, "some")
    if len(node.args) > 2 or (some is not None and len(node.args) > 1):
        return None
    if any(item.arg != "some" for item in node.keywords) or not node.args:
        return None
    value = some.value if some is not None else (node.args[1] if len(node.args) == 2 else None)
    mode = "" if value is None else {True: "", False: ', mode="complete"'}.get(constant(value))  # type: ignore[call-overload]
    if mode is None:
        return None
    return f"{prefix}.linalg.qr({ctx.text(node.args[0])}{mode})"


def _fix_cholesky(node: ast.Call, prefix: str, ctx: Context) -> str | None:
    upper = keyword(node, "upper")
    if len(node.args) != 1 or any(item.arg != "upper" for item in node.keywords):
        return None
    if upper is not None and constant(upper.value) is not False:
        return None
    return f"{prefix}.linalg.cholesky({ctx.text(node.args[0])})"


_NORM_PARAMETERS = ("input", "p", "dim", "keepdim", "out", "dtype")


def _fix_norm(node: ast.Call, prefix: str, ctx: Context) -> str | None:
    if len(node.args) > 4:
        return None
    given: dict[str, ast.expr] = dict(zip(_NORM_PARAMETERS, node.args, strict=False))
    for item in node.keywords:
        if item.arg in given or item.arg not in _NORM_PARAMETERS:
            return None
        given[str(item.arg)] = item.value
    if "input" not in given or "out" in given:
        return None
    order = _norm_order(given.get("p"))
    dim = given.get("dim")
    if order is None or (dim is not None and not _is_int_literal(dim)):
        return None  # matrix norms, tuples of dims, p=None: not provably a vector norm
    parts = [ctx.text(given["input"])]
    if order != "2":
        parts.append(order)
    parts += [
        f"{name}={ctx.text(given[name])}" for name in ("dim", "keepdim", "dtype") if name in given
    ]
    return f"{prefix}.linalg.vector_norm({', '.join(parts)})"


def _norm_order(p: ast.expr | None) -> str | None:
    """The vector-norm order torch.norm uses for ``p``, as source text."""
    if p is None or constant(p) == "fro":
        return "2"
    value = _number(p)
    if value is None:
        return None
    return repr(value) if isinstance(value, float) else str(value)


def _number(node: ast.expr) -> int | float | None:
    """The value of a literal number (``2``, ``-1``, ``0.5``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    value = constant(node)
    if type(value) in (int, float) and math.isfinite(value):  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    return None


def _is_int_literal(node: ast.expr) -> bool:
    return type(_number(node)) is int


def _no_fix(node: ast.Call, prefix: str, ctx: Context) -> str | None:
    return None  # the replacement changes argument order or results


LINALG_FIXES: dict[str, Callable[[ast.Call, str, Context], str | None]] = {
    "torch.norm": _fix_norm,
    "torch.chain_matmul": _fix_chain_matmul,
    "torch.qr": _fix_qr,
    "torch.cholesky": _fix_cholesky,
    "torch.ger": _fix_ger,
    "torch.lu": _no_fix,
    "torch.lu_solve": _no_fix,
    "torch.triangular_solve": _no_fix,
    "torch.svd": _no_fix,
}


_RANGE_KEYWORDS = {"dtype", "device", "requires_grad", "layout"}


def range_fix(node: ast.Call, ctx: Context) -> Fix | None:
    prefix = torch_prefix(node, ctx)
    if prefix is None or not 2 <= len(node.args) <= 3 or not plain_args(node):
        return None
    if any(item.arg not in _RANGE_KEYWORDS for item in node.keywords):
        return None
    numbers = [_number(arg) for arg in node.args]
    if any(type(value) is not int for value in numbers):
        return None
    start, end, step = (*numbers, 1) if len(numbers) == 2 else numbers
    assert isinstance(start, int) and isinstance(end, int) and isinstance(step, int)
    if step == 0:
        return None
    count = (end - start) // step + 1  # torch.range's length: floor((end - start) / step) + 1
    if count <= 0:
        return None
    bounds = [float(start), float(start + count * step)] + ([float(step)] if step != 1 else [])
    parts = [repr(value) for value in bounds] + [ctx.text(item) for item in node.keywords]
    text = f"{prefix}.arange({', '.join(parts)})"
    return Fix("Use `torch.arange` with the end excluded", (replace(ctx, node, text),))


_LEGACY_TYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Byte": "uint8",
    "Char": "int8",
    "Short": "int16",
    "Int": "int32",
    "Long": "int64",
    "Bool": "bool",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
}
LEGACY_CONSTRUCTORS = {
    f"{module}.{kind}Tensor": dtype
    for kind, dtype in _LEGACY_TYPES.items()
    for module in ("torch", "torch.cuda")
}
