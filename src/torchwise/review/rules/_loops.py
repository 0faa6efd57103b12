"""What training code does, for the training-loop rules.

Predicates classify a call (a backward, an optimizer step, a `zero_grad`, ...).
:class:`Effects` follows calls to functions defined in the same file, so a
``train_one_epoch()`` helper called from an epoch loop counts as part of it.
Loop depths count from the enclosing function (the engine resets them there).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator

from torchwise.review import facts as F
from torchwise.review.rules._util import is_false

_FRAMEWORK_RECEIVERS = re.compile(r"(^|\.)(accelerator|fabric|trainer|engine|deepspeed\w*|self)$")


def is_backward(call: F.CallEvent) -> bool:
    return call.method == "backward" or call.qualname == "torch.autograd.backward"


def is_tensor_backward(call: F.CallEvent) -> bool:
    """A backward on a tensor, not through a framework that scales losses itself."""
    if not is_backward(call):
        return False
    return call.receiver is None or not _FRAMEWORK_RECEIVERS.search(call.receiver)


def is_optimizer_step(call: F.CallEvent) -> bool:
    if call.method == "step":
        return call.receiver_kind in (F.OPTIMIZER, F.SCALER)
    return call.method == "optimizer_step"  # torch_xla's xm.optimizer_step(opt)


def is_scheduler_step(call: F.CallEvent) -> bool:
    return call.method == "step" and call.receiver_kind == F.SCHEDULER


def is_zero_grad(call: F.CallEvent) -> bool:
    return call.method == "zero_grad"


def is_eval(call: F.CallEvent) -> bool:
    if call.method == "eval" and not call.node.args:
        return True
    return call.method == "train" and bool(call.node.args) and is_false(call.node.args[0])


def is_train(call: F.CallEvent) -> bool:
    if call.method != "train":
        return False
    return not call.node.args or not is_false(call.node.args[0])


def is_model_call(call: F.CallEvent) -> bool:
    return call.callee_kind == F.MODULE


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
    """Which kinds of call each function of the file makes, directly or
    through the file's other functions (a fixpoint over the local call graph)."""

    def __init__(self, module: F.ModuleFacts) -> None:
        self.by_name: dict[str, list[F.FunctionFacts]] = {}
        for function in module.functions:
            self.by_name.setdefault(function.name, []).append(function)
        self._memo: dict[tuple[str, str], bool] = {}

    def region_does(self, calls: Iterable[F.CallEvent], predicate_name: str) -> bool:
        return any(self.call_does(call, predicate_name) for call in calls)

    def call_does(self, call: F.CallEvent, predicate_name: str, depth: int = 0) -> bool:
        if _PREDICATES[predicate_name](call):
            return True
        name = local_callee(call)
        if name is None or name not in self.by_name or depth > 4:
            return False
        key = (name, predicate_name)
        if key not in self._memo:
            self._memo[key] = False  # breaks recursion
            self._memo[key] = any(
                self.call_does(inner, predicate_name, depth + 1)
                for function in self.by_name[name]
                for inner in function.calls
            )
        return self._memo[key]


_PREDICATES = {
    "backward": is_tensor_backward,
    "step": is_optimizer_step,
    "zero_grad": is_zero_grad,
    "eval": is_eval,
    "train": is_train,
}


def regions(module: F.ModuleFacts) -> Iterator[tuple[F.FunctionFacts | None, list[F.LoopFacts]]]:
    """Each function with its loops, then the module's top-level loops."""
    for function in module.functions:
        yield function, function.loops
    yield None, module.loops


def innermost_loop(loops: list[F.LoopFacts], call: F.CallEvent) -> F.LoopFacts | None:
    """The deepest of ``loops`` that contains ``call`` (None outside every loop)."""
    return max((loop for loop in loops if call in loop.calls), key=_depth, default=None)


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
