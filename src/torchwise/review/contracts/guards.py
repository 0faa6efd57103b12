"""Evaluating a release's own argument checks on the values a call passes.

A guard's condition is a small expression tree over the callable's
parameters, written by the generator from torch's source (``if not 0.0 <= p
<= 1.0: raise ValueError(...)`` becomes ``["not", ["cmp", ["<=", "<="],
[["const", 0.0], ["param", "p"], ["const", 1.0]]]]``). Review knows only some
of a call's values (the literals it writes, the defaults it leaves), so the
evaluation is three-valued: a condition is true, false, or :data:`UNKNOWN`,
and only a condition that is *true* on what the call shows is reported. An
operation the table may hold but this module does not know is unknown, never
an error: a newer table must not make review crash or guess.

Node forms: ``["const", v]``, ``["param", name]``, ``["tuple"|"list"|"set",
[items]]``, ``["not", e]``, ``["and"|"or", [items]]``, ``["cmp", [ops],
[operands]]``, ``["bin", op, a, b]``, ``["neg", e]``, ``["ifexp", test, a,
b]``, ``["call", function, [args]]``, ``["method", e, name, [args]]`` and
``["type", name]`` (a class named in ``isinstance``).
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from torchwise.review.contracts.model import Expr


class _Unknown:
    """A value the call does not show."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
    "is": operator.is_,
    "is not": operator.is_not,
}
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}
#: The builtins a guard may call, all pure.
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "abs": abs,
    "int": int,
    "float": float,
    "bool": bool,
    "str": str,
    "min": min,
    "max": max,
    "all": all,
    "any": any,
    "callable": callable,
    "round": round,
}
_STRING_METHODS = frozenset({"lower", "upper", "startswith", "endswith", "strip"})
#: Classes a guard's ``isinstance`` may name, as the generator spells them.
#: Values a call writes out are Python literals: never a tensor, a device or
#: a module, so those names test false on them.
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (float,),
    "bool": (bool,),
    "str": (str,),
    "list": (list,),
    "tuple": (tuple,),
    "dict": (dict,),
    "set": (set,),
    "NoneType": (type(None),),
    "numbers.Number": (numbers.Number,),
    "numbers.Real": (numbers.Real,),
    "numbers.Integral": (numbers.Integral,),
    "Number": (numbers.Number,),
    "Real": (numbers.Real,),
    "Integral": (numbers.Integral,),
    "complex": (complex,),
}
_NEVER_LITERAL = frozenset(
    {"torch.Tensor", "Tensor", "torch.device", "device", "torch.dtype", "dtype", "Module"}
)


class _NotLiteral:
    """A class no literal is an instance of (``torch.Tensor`` for a written ``3``)."""


def evaluate(expr: Expr, values: Mapping[str, object]) -> object:
    """The value of ``expr`` given the parameters' values (absent: unknown)."""
    try:
        return _evaluate(expr, values)
    except Exception:  # a guard torch writes for its own types: say nothing
        return UNKNOWN


def holds(expr: Expr, values: Mapping[str, object]) -> bool:
    """Whether the condition is known to be true for these values."""
    value = evaluate(expr, values)
    if value is UNKNOWN:
        return False
    try:
        return bool(value)
    except Exception:
        return False


def referenced(expr: Expr) -> set[str]:
    """The parameters a condition reads."""
    found: set[str] = set()
    pending: list[Any] = [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, list) and node:
            if node[0] == "param" and len(node) == 2 and isinstance(node[1], str):
                found.add(node[1])
                continue
            pending.extend(item for item in node[1:] if isinstance(item, list))
    return found


def render(parts: Sequence[Expr], values: Mapping[str, object]) -> str:
    """A message from its parts, with the call's values filled in."""
    text = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
            continue
        value = evaluate(part, values)
        text.append("…" if value is UNKNOWN else str(value))
    return "".join(text)


def _evaluate(expr: Expr, values: Mapping[str, object]) -> object:
    if not isinstance(expr, list) or not expr:
        return UNKNOWN
    head = expr[0]
    if head == "const":
        return expr[1]
    if head == "param":
        return values.get(expr[1], UNKNOWN)
    if head in ("tuple", "list", "set"):
        items = [_evaluate(item, values) for item in expr[1]]
        if any(item is UNKNOWN for item in items):
            return UNKNOWN
        return {"tuple": tuple, "list": list, "set": set}[head](items)
    if head == "not":
        operand = _evaluate(expr[1], values)
        return UNKNOWN if operand is UNKNOWN else not operand
    if head in ("and", "or"):
        return _boolean(head, expr[1], values)
    if head == "cmp":
        return _compare(expr[1], expr[2], values)
    if head == "bin":
        left, right = _evaluate(expr[2], values), _evaluate(expr[3], values)
        if left is UNKNOWN or right is UNKNOWN or expr[1] not in _BINARY:
            return UNKNOWN
        return _BINARY[expr[1]](left, right)
    if head == "neg":
        operand = _evaluate(expr[1], values)
        return UNKNOWN if operand is UNKNOWN else -operand  # type: ignore[operator]
    if head == "ifexp":
        test = _evaluate(expr[1], values)
        if test is UNKNOWN:
            return UNKNOWN
        return _evaluate(expr[2] if test else expr[3], values)
    if head == "call":
        return _call(expr[1], expr[2], values)
    if head == "method":
        return _method(expr, values)
    return UNKNOWN


def _boolean(head: str, items: list[Expr], values: Mapping[str, object]) -> object:
    """``and``/``or`` as Python short-circuits them, an unknown operand only
    deciding nothing: ``x and y`` is false as soon as one operand is false."""
    unknown = False
    result: object = head == "and"
    for item in items:
        value = _evaluate(item, values)
        if value is UNKNOWN:
            unknown = True
            continue
        if bool(value) is (head == "or"):
            return value  # decided, whatever the unknown operands hold
        result = value
    return UNKNOWN if unknown else result


def _compare(ops: list[str], operands: list[Expr], values: Mapping[str, object]) -> object:
    evaluated = [_evaluate(item, values) for item in operands]
    unknown = False
    for op, left, right in zip(ops, evaluated, evaluated[1:], strict=False):
        if left is UNKNOWN or right is UNKNOWN or op not in _COMPARE:
            unknown = True
            continue
        if not _COMPARE[op](left, right):
            return False  # a chain is false as soon as one link is
    return UNKNOWN if unknown else True


def _call(function: str, arguments: list[Expr], values: Mapping[str, object]) -> object:
    if function == "isinstance":
        return _isinstance(arguments, values)
    evaluated = [_evaluate(item, values) for item in arguments]
    if function not in _FUNCTIONS or any(item is UNKNOWN for item in evaluated):
        return UNKNOWN
    return _FUNCTIONS[function](*evaluated)


def _isinstance(arguments: list[Expr], values: Mapping[str, object]) -> object:
    value = _evaluate(arguments[0], values)
    if value is UNKNOWN:
        return UNKNOWN
    names = arguments[1][1] if arguments[1][0] == "types" else [arguments[1][1]]
    classes: list[type] = []
    for name in names:
        if name in _TYPES:
            classes.extend(_TYPES[name])
        elif name not in _NEVER_LITERAL:
            return UNKNOWN  # a class of torch's that a literal might be (an enum...)
    return isinstance(value, tuple(classes) or (_NotLiteral,))


def _method(expr: Expr, values: Mapping[str, object]) -> object:
    receiver = _evaluate(expr[1], values)
    arguments = [_evaluate(item, values) for item in expr[3]]
    if (
        not isinstance(receiver, str)
        or expr[2] not in _STRING_METHODS
        or any(item is UNKNOWN for item in arguments)
    ):
        return UNKNOWN
    return getattr(receiver, expr[2])(*arguments)
