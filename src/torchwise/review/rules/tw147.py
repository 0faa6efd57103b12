"""TW147 data-iterator-exhausted (training).

The class docstring is its user documentation (`torchwise rules TW147`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import name_uses
from torchwise.review.registry import Rule, rule

_STOPS = {"StopIteration", "Exception", "BaseException"}


@rule
class DataIteratorExhausted(Rule):
    """## What it does
    Flags `next(batches)` in a loop over a step count (`for i in
    range(max_iter)`, `while step < total`), where `batches = iter(loader)`
    was made once before the loop and is never made again in it (nor by a
    loop around it: then the step loop is one epoch), with no
    `except StopIteration` around the call and no default (`next(batches,
    None)`). A loop over `range(len(loader))` is one epoch and is not flagged.

    ## Why is this bad?
    An iterator over a `DataLoader` is exhausted after one epoch: the next
    `next()` raises `StopIteration` (inside a `for` over a generator it ends
    the generator silently instead). Training meant to run for many epochs
    stops, often hours in, after the first.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    def train(dataset, model, max_iter):
        batches = iter(DataLoader(dataset, batch_size=32, shuffle=True))
        for iteration in range(max_iter):
            images, targets = next(batches)
            model(images)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    def train(dataset, model, max_iter):
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        batches = iter(loader)
        for iteration in range(max_iter):
            try:
                images, targets = next(batches)
            except StopIteration:
                batches = iter(loader)  # a new epoch, reshuffled
                images, targets = next(batches)
            model(images)
    ```
    """

    code = "TW147"
    name = "data-iterator-exhausted"
    family = "training"
    severity = Severity.WARNING
    impact = "crash"
    message = (
        "`{iterator}` (line {made}) ends after one pass over the loader, but this loop "
        "runs for {steps}: `next()` raises StopIteration after the first epoch"
    )
    needs_text = ("next(",)
    in_test_modules = False  # tests size their loaders to the steps they take

    def __init__(self) -> None:
        self.pending: list[tuple[ast.Call, str, int, F.LoopFacts, str]] = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Name) and func.id == "next") or len(node.args) != 1:
            return
        if "next" in ctx.scopes[0].functions or not ctx.loops:
            return
        function = ctx.function
        if function is not None and function.name == "__next__":
            return  # an iterator's own `__next__`: StopIteration is how it ends
        iterator = ctx.dotted(node.args[0])
        value = ctx.value_of(node.args[0]) if iterator is not None else None
        if iterator is None or value is None or value.kind != F.ITERATOR:
            return
        made = value.node
        if not isinstance(made, ast.Call) or not made.args:
            return
        source = ctx.value_of(made.args[0])
        if source is None or source.kind != F.LOADER:
            return
        loop = ctx.loops[-1]
        steps = _step_count(loop.node, ctx, ctx.text(made.args[0]))
        if steps is None or _catches_stop(ctx):
            return
        if made.lineno >= getattr(loop.node, "lineno", 0):
            return  # made in the loop: a new pass each time
        if any(_encloses(outer.node, made) for outer in ctx.loops[:-1]):
            return  # made again by an enclosing loop: the step loop is one epoch
        self.pending.append((node, iterator, made.lineno, loop, steps))

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._judge(function.node, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._judge(module.node, ctx)

    def _judge(self, scope: ast.AST, ctx: Context) -> None:
        if not self.pending:
            return
        uses = name_uses(scope)
        kept = []
        for node, iterator, made, loop, steps in self.pending:
            start = getattr(loop.node, "lineno", 0)
            end = getattr(loop.node, "end_lineno", start) or start
            if not _inside(node, scope):
                kept.append((node, iterator, made, loop, steps))
                continue
            refilled = any(store and start <= at <= end for at, _, store in uses.get(iterator, []))
            if not refilled:
                ctx.report(self, node, iterator=iterator, made=str(made), steps=steps)
        self.pending = kept


def _encloses(loop: ast.AST, node: ast.AST) -> bool:
    start, end = getattr(loop, "lineno", 0), getattr(loop, "end_lineno", 0) or 0
    return start <= getattr(node, "lineno", -1) <= end


def _inside(node: ast.AST, scope: ast.AST) -> bool:
    start, end = getattr(scope, "lineno", 0), getattr(scope, "end_lineno", None)
    line = getattr(node, "lineno", 0)
    return end is None or start <= line <= end


def _step_count(loop: ast.AST, ctx: Context, source: str) -> str | None:
    """How long the loop runs, when it is a step count unrelated to the loader."""
    if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call):
        func = loop.iter.func
        if isinstance(func, ast.Name) and func.id == "range" and loop.iter.args:
            text = ctx.text(loop.iter)
            if "len(" in text or source in text:
                return None  # one epoch: `range(len(loader))`
            return f"`{text}`"
        return None
    if isinstance(loop, ast.While):
        text = ctx.text(loop.test)
        if "len(" in text or source in text:
            return None
        return f"`while {text}`" if not isinstance(loop.test, ast.Constant) else "ever"
    return None


def _catches_stop(ctx: Context) -> bool:
    """Inside a ``try`` whose handlers catch StopIteration (or anything)."""
    for parent in ctx.parents:
        if not isinstance(parent, ast.Try):
            continue
        for handler in parent.handlers:
            caught = handler.type
            if caught is None:
                return True
            names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
            if any(ctx.text(name).rsplit(".", 1)[-1] in _STOPS for name in names):
                return True
    return False
