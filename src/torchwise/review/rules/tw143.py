"""TW143 metric-over-wrong-count (training).

The class docstring is its user documentation (`torchwise rules TW143`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

_SCALAR_WRAPPERS = {"item", "sum", "mean", "detach", "cpu", "float", "data", "tolist"}


@rule
class MetricOverWrongCount(Rule):
    """## What it does
    Flags an average whose denominator does not count what was summed: a sum of
    per-batch mean losses (`total += criterion(out, y).item()` with the default
    `reduction="mean"`) divided by the number of samples
    (`len(loader.dataset)`), and a division by `len(loader.dataset)` for a
    loader whose sampler draws only a subset of it (a fold, a split).

    ## Why is this bad?
    A batch mean already divides by the batch size: dividing their sum by the
    number of samples divides by it twice, so the reported loss is about
    `batch_size` times too small. A `SubsetRandomSampler` visits only its
    indices while `loader.dataset` is the whole dataset, so the average is too
    small by the ratio of the two. Either way the number looks plausible, is
    wrong, and is what model selection and papers then compare.

    ## Example
    ```python
    from torch import nn

    criterion = nn.CrossEntropyLoss()
    total = 0.0
    for x, y in loader:
        total += criterion(model(x), y).item()
    average = total / len(loader.dataset)
    ```

    ## Use instead
    ```python
    from torch import nn

    criterion = nn.CrossEntropyLoss(reduction="sum")
    total = 0.0
    for x, y in loader:
        total += criterion(model(x), y).item()
    average = total / len(loader.dataset)
    ```
    """

    code = "TW143"
    name = "metric-over-wrong-count"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = "{what}"

    def __init__(self) -> None:
        # (region, name) -> the statement that sums batch means into it
        self.sums_of_means: dict[tuple[int, str], ast.AST] = {}

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        region = id(ctx.function) if ctx.function is not None else 0
        target = ctx.dotted(node.target)
        if target is None:
            return
        if isinstance(node.op, ast.Add) and ctx.loops:
            loss = ctx.value_of(_unwrap(node.value))
            if _batch_mean(loss):
                self.sums_of_means[(region, target)] = node
        elif isinstance(node.op, ast.Div):
            self._division(node.target, node.value, node, ctx)

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> None:
        if isinstance(node.op, ast.Div):
            self._division(node.left, node.right, node, ctx)

    def _division(self, left: ast.expr, right: ast.expr, node: ast.AST, ctx: Context) -> None:
        loader = _dataset_length(right)
        if loader is None:
            return
        region = id(ctx.function) if ctx.function is not None else 0
        name = ctx.dotted(left)
        summed = self.sums_of_means.pop((region, name), None) if name else None
        line = getattr(node, "lineno", "?")
        if summed is not None:
            what = (
                f"`{name}` sums per-batch mean losses, then is divided by the number of samples "
                f"(line {line}): the average is about batch_size times too small; "
                'use `reduction="sum"` or divide by `len(loader)`'
            )
            ctx.report(self, summed, what=what)
            return
        value = ctx.value_of(loader)
        if value is not None and value.kind == F.LOADER and "subset" in value.flags:
            what = (
                f"`len({ctx.text(loader)}.dataset)` counts the whole dataset, but the loader's "
                "sampler draws only a subset: divide by the number of samples it visits"
            )
            ctx.report(self, node, what=what)


def _batch_mean(loss: F.Value | None) -> bool:
    """A loss known (not guessed from a name) to be the default batch mean."""
    return (
        loss is not None
        and loss.kind == F.LOSS
        and loss.origin is not None
        and not loss.flags & {"unreduced", "summed", "guessed"}
    )


def _unwrap(expr: ast.expr) -> ast.expr:
    """``criterion(out, y)`` in ``criterion(out, y).sum().item()`` or ``float(loss)``."""
    while True:
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and (expr.func.attr in _SCALAR_WRAPPERS)
        ):
            expr = expr.func.value
        elif isinstance(expr, ast.Attribute) and expr.attr == "data":
            expr = expr.value
        elif (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Name)
            and expr.func.id == "float"
            and len(expr.args) == 1
        ):
            expr = expr.args[0]
        else:
            return expr


def _dataset_length(expr: ast.expr) -> ast.expr | None:
    """``loader`` in ``len(loader.dataset)`` (also ``float(len(...))``)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "float":
        expr = expr.args[0] if expr.args else expr
    if not (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "len"
        and len(expr.args) == 1
    ):
        return None
    inner = expr.args[0]
    if isinstance(inner, ast.Attribute) and inner.attr == "dataset":
        return inner.value
    return None
