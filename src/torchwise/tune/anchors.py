"""Where a training script's loop is: found by what the code does, never by running it.

The loop is the innermost ``for``/``while`` whose own statements call
``.backward()``; in it, the loss is what ``backward()`` (or ``scaler.scale()``)
gets, the optimizer what ``.step()`` (or ``scaler.step()``) steps, never a
scheduler; the model is whose ``.parameters()`` the optimizer is built over; the
forward is the first statement that calls it. Outside the loop: the
optimizer's and the DataLoader's constructors, the model's assignment and the
last top-level import. :mod:`torchwise.tune.script` edits the script there.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Anchors:
    """Where the edits go, as 0-based line indexes into the script (None: not found)."""

    last_import: int | None
    optimizer_call: ast.Call | None
    optimizer_stmt: int | None
    optimizer_name: str | None
    loader_call: ast.Call | None
    model_stmt: int | None
    model_name: str | None
    input_name: str | None
    forward: tuple[int, int] | None  # first and last line of the forward + loss statements
    backward: int | None
    step: int | None
    zero_grad: int | None
    loop: tuple[int, int] | None


#: torch.optim's optimizer classes, as a script may name them after ``from torch.optim import``
_OPTIMIZERS = frozenset(
    {
        "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop",
        "ASGD", "Rprop", "LBFGS", "SparseAdam", "Adafactor", "Muon",
    }
)  # fmt: skip


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _method_calls(stmt: ast.AST, method: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method
    ]


def _is_optimizer(name: str) -> bool:
    return name.startswith(("torch.optim.", "optim.")) or name.split(".")[-1] in _OPTIMIZERS


def _flatten(body: Sequence[ast.stmt]) -> list[ast.stmt]:
    """Statements with those inside ``with`` blocks (autocast already there)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.With):
            out += _flatten(stmt.body)
    return out


def _training_loop(tree: ast.Module) -> ast.For | ast.While | None:
    """The innermost loop whose own statements (not a nested loop's) call backward()."""
    loops = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.For, ast.While))
        and any(
            _method_calls(s, "backward")
            for s in _flatten(n.body)
            if not isinstance(s, (ast.For, ast.While))
        )
    ]
    return max(loops, key=lambda n: n.col_offset, default=None)


def _loss_name(call: ast.Call) -> str:
    """``loss.backward()`` -> loss; ``scaler.scale(loss).backward()`` -> loss."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else call.func
    if isinstance(receiver, ast.Call) and receiver.args:
        return _dotted(receiver.args[0])
    return _dotted(receiver)


def _optimizer_step(stmt: ast.stmt) -> str | None:
    """The optimizer a statement steps: ``opt.step()``, or ``scaler.step(opt)``."""
    for call in _method_calls(stmt, "step"):
        assert isinstance(call.func, ast.Attribute)
        receiver = _dotted(call.func.value)
        if call.args and "scal" in receiver.lower():
            return _dotted(call.args[0]) or None
        if not call.args and "sched" not in receiver.lower():
            return receiver or None
    return None


def _model_name(tree: ast.Module, optimizer: str | None) -> str | None:
    """The model: whose ``.parameters()`` the optimizer is built over."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_optimizer(_dotted(node.func)):
            continue
        for arg in node.args[:1]:
            for call in _method_calls(arg, "parameters"):
                assert isinstance(call.func, ast.Attribute)
                return _dotted(call.func.value) or None
    return None


def find_anchors(source: str) -> Anchors:
    tree = ast.parse(source)
    last_import = None
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            last_import = (stmt.end_lineno or stmt.lineno) - 1
    loop = _training_loop(tree)
    backward = step = zero_grad = forward = None
    input_name = optimizer_name = loss_name = None
    body = _flatten(loop.body) if loop is not None else []
    for stmt in body:
        calls = _method_calls(stmt, "backward")
        if calls and backward is None:
            backward, loss_name = stmt.lineno - 1, _loss_name(calls[0])
        stepped = _optimizer_step(stmt)
        if stepped is not None and step is None:
            step, optimizer_name = stmt.lineno - 1, stepped
        if _method_calls(stmt, "zero_grad") and zero_grad is None:
            zero_grad = stmt.lineno - 1
    model_name = _model_name(tree, optimizer_name)
    if loop is not None:
        forward, model_name, input_name = _forward(body, loss_name, backward, model_name)
    optimizer_call, optimizer_stmt = _constructor(tree, _is_optimizer)
    loader_call, _ = _constructor(tree, lambda name: name.endswith("DataLoader"))
    model_stmt = _assignment(tree, model_name, before=loop)
    return Anchors(
        last_import,
        optimizer_call,
        optimizer_stmt,
        optimizer_name,
        loader_call,
        model_stmt,
        model_name,
        input_name,
        forward,
        backward,
        step,
        zero_grad,
        (loop.lineno - 1, (loop.end_lineno or loop.lineno) - 1) if loop is not None else None,
    )


def _calls_of(stmt: ast.stmt) -> list[ast.Call]:
    return [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]


def _forward(
    body: Sequence[ast.stmt], loss_name: str | None, backward: int | None, model: str | None
) -> tuple[tuple[int, int] | None, str | None, str | None]:
    """(first and last line of forward + loss, the model's name, the input's name).

    The forward is the first statement that calls the model (by its name when
    the optimizer's ``.parameters()`` named it, else the first plain-name call),
    the loss the assignment to the name ``backward()`` is called on; both in the
    same block, so wrapping them in a ``with`` keeps the code valid.
    """
    if loss_name is None or backward is None:
        return None, None, None
    loss_stmt = next(
        (
            s
            for s in body
            if isinstance(s, ast.Assign)
            and any(_dotted(t) == loss_name for t in s.targets)
            and s.lineno - 1 < backward
        ),
        None,
    )
    if loss_stmt is None:
        return None, None, None
    block = next((b for b in _blocks(body) if loss_stmt in b), [])
    for stmt in block:
        if stmt.lineno > loss_stmt.lineno:
            break
        for call in _calls_of(stmt):
            if not isinstance(call.func, ast.Name) or not call.args:
                continue
            if model is not None and call.func.id != model:
                continue
            start, end = stmt.lineno - 1, (loss_stmt.end_lineno or loss_stmt.lineno) - 1
            return (start, end), call.func.id, _dotted(call.args[0]) or None
    return None, None, None


def _blocks(body: Sequence[ast.stmt]) -> list[list[ast.stmt]]:
    """The statement lists of a loop body: itself and every ``with`` body in it."""
    out = [list(body)]
    for stmt in body:
        if isinstance(stmt, ast.With):
            out += _blocks(stmt.body)
    return out


def _constructor(
    tree: ast.Module, wanted: Callable[[str], bool]
) -> tuple[ast.Call | None, int | None]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        if wanted(_dotted(node.value.func)):
            return node.value, node.lineno - 1
    return None, None


def _assignment(tree: ast.Module, name: str | None, before: ast.stmt | None) -> int | None:
    """The model's last assignment before the loop, else its first anywhere (another function)."""
    if name is None:
        return None
    lines = sorted(
        (node.end_lineno or node.lineno) - 1
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(_dotted(t) == name for t in node.targets)
    )
    earlier = [line for line in lines if before is None or line < before.lineno - 1]
    return earlier[-1] if earlier else (lines[0] if lines else None)
