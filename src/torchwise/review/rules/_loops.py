"""What training code does, for the training-loop rules.

Predicates classify a call (a backward, an optimizer step, a `zero_grad`, ...).
:class:`Effects` follows calls to functions defined in the same file, so a
``train_one_epoch()`` helper called from an epoch loop counts as part of it.
Loop depths count from the enclosing function (the engine resets them there).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.effects import (
    MODEL_CALL_WITH_GRAD,
    PREDICATES,
    is_backward,
    is_eval,
    is_model_call,
    is_optimizer_step,
    is_scheduler_step,
    is_tensor_backward,
    is_train,
    is_zero_grad,
)

__all__ = [
    "is_backward",
    "is_eval",
    "is_model_call",
    "is_optimizer_step",
    "is_scheduler_step",
    "is_tensor_backward",
    "is_train",
    "is_zero_grad",
]


def position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def local_callee(call: F.CallEvent) -> str | None:
    """The name of a same-file function this call may run: ``f(...)`` or ``self.f(...)``."""
    func = call.node.func
    if isinstance(func, ast.Name):
        return func.id
    if call.receiver == "self" and call.method is not None:
        return call.method
    return None


class Effects:
    """Which kinds of call each call makes, directly or through the project's
    functions: the file's own, and (through the project index) those of other
    files, so ``evaluate(model)`` imported from ``engine.py`` sets eval mode
    when ``engine.evaluate`` does."""

    def __init__(self, module: F.ModuleFacts, ctx: Context | None = None) -> None:
        self.by_name: dict[str, list[F.FunctionFacts]] = {}
        for function in module.functions:
            self.by_name.setdefault(function.name, []).append(function)
        self.ctx = ctx
        self._memo: dict[tuple[str, str], bool] = {}

    def region_does(self, calls: Iterable[F.CallEvent], predicate_name: str) -> bool:
        return any(self.call_does(call, predicate_name) for call in calls)

    def call_does(self, call: F.CallEvent, predicate_name: str, depth: int = 0) -> bool:
        if PREDICATES[predicate_name](call):
            return True
        if predicate_name == MODEL_CALL_WITH_GRAD and call.no_grad:
            return False  # whatever the callee runs, it runs under no_grad
        if call.target is not None and self.ctx is not None:
            return predicate_name in self.ctx.project.effects(call.target)
        name = local_callee(call)
        if name is None or name not in self.by_name or depth > 4:
            return False
        key = (name, predicate_name)
        if key not in self._memo:
            self._memo[key] = False  # breaks recursion
            self._memo[key] = any(
                self.call_does(inner, predicate_name, depth + 1)
                for function in self.by_name[name]
                if not (function.no_grad and predicate_name == MODEL_CALL_WITH_GRAD)
                for inner in function.calls
            )
        return self._memo[key]


def regions(module: F.ModuleFacts) -> Iterator[tuple[F.FunctionFacts | None, list[F.LoopFacts]]]:
    """Each function with its loops, then the module's top-level loops."""
    for function in module.functions:
        yield function, function.loops
    yield None, module.loops


def innermost_loop(loops: list[F.LoopFacts], call: F.CallEvent) -> F.LoopFacts | None:
    """The deepest of ``loops`` that contains ``call`` (None outside every loop)."""
    return max((loop for loop in loops if call in loop.calls), key=_depth, default=None)


def loop_depth(loop: F.LoopFacts) -> int:
    """How many loops enclose ``loop`` in its function (0 for an outermost one)."""
    return _depth(loop)


def _depth(loop: F.LoopFacts) -> int:
    depth = 0
    while loop.outer is not None:
        loop, depth = loop.outer, depth + 1
    return depth


def enclosing_loops(loop: F.LoopFacts | None) -> Iterator[F.LoopFacts]:
    while loop is not None:
        yield loop
        loop = loop.outer


def innermost_loop_is(loop: F.LoopFacts, call: F.CallEvent) -> bool:
    """Whether ``call`` sits directly in ``loop`` (not in a loop nested inside it).
    Loop depths count from the enclosing function, as ``_depth`` does."""
    return call.loop_depth == _depth(loop) + 1


def top_level_calls(module: F.ModuleFacts) -> list[F.CallEvent]:
    """Calls made by the module's own statements, not inside any function."""
    inside = all_function_calls(module)
    return [call for call in module.calls if call not in inside]


def all_function_calls(module: F.ModuleFacts) -> set[F.CallEvent]:
    return {call for function in module.functions for call in function.calls}


def def_line(node: ast.AST) -> ast.AST:
    """A node spanning only the ``def`` line, so findings point there."""
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    marker = ast.Name(id=node.name)
    marker.lineno = marker.end_lineno = node.lineno
    marker.col_offset = node.col_offset
    marker.end_col_offset = node.col_offset + len("def ") + len(node.name)
    return marker


def callee(expr: ast.expr) -> ast.expr:
    return expr.func if isinstance(expr, ast.Call) else expr
