"""Reading Python syntax: the small questions every rule asks of a node."""

from __future__ import annotations

import ast

_NOT_CONSTANT = object()


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for item in call.keywords:
        if item.arg == name:
            return item
    return None


def has_kwargs_splat(call: ast.Call) -> bool:
    """``f(**options)`` may pass anything: rules about missing keywords stay quiet."""
    return any(item.arg is None for item in call.keywords)


def constant(node: ast.AST | None) -> object:
    """The value of a literal (``True``, ``0.5``, ``"x"``), else a sentinel."""
    if isinstance(node, ast.Constant):
        return node.value
    return _NOT_CONSTANT


def is_true(node: ast.AST | None) -> bool:
    return constant(node) is True


def is_false(node: ast.AST | None) -> bool:
    return constant(node) is False


def last_name(qualname: str | None) -> str:
    return "" if qualname is None else qualname.rsplit(".", 1)[-1]
