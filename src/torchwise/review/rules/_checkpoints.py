"""Checkpoints and reproducibility (TW6xx): what a run leaves behind, and
whether it can be repeated or resumed."""

from __future__ import annotations

import ast

from torchwise.review.engine import facts as F

SAVE = {"torch.save"}
#: Calls whose result is a plain container of tensors, not a module.
NOT_MODULES = {"torch.load", "collections.OrderedDict", "copy.deepcopy"}
PROGRESS_KEYS = {"epoch", "step", "global_step", "iteration", "iter", "steps", "epochs"}


def state_dict_of(expr: ast.expr) -> ast.expr | None:
    """``model`` for ``model.state_dict()`` (also ``model.module.state_dict()``)."""
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "state_dict"
    ):
        return expr.func.value
    return None


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else None


def trains(loop: F.LoopFacts) -> bool:
    backward = any(call.method == "backward" for call in loop.calls)
    step = any(
        call.method == "step" and call.receiver_kind in {F.OPTIMIZER, F.SCALER}
        for call in loop.calls
    )
    return backward and step


def loop_header(node: ast.AST) -> ast.AST:
    """A node spanning the ``for``/``while`` keyword, not the whole loop body."""
    line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
    width = 5 if isinstance(node, ast.While) else 3
    return ast.Pass(lineno=line, col_offset=col, end_lineno=line, end_col_offset=col + width)
