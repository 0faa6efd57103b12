"""TW154 loss-rebuilt-without-graph (training).

The class docstring is its user documentation (`torchwise rules TW154`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

#: Calls that build a new tensor (or a plain number) from their argument's
#: values: whatever autograd graph the argument had stays behind.
_REBUILDERS = frozenset(
    {
        "torch.tensor",
        "torch.Tensor",
        "torch.FloatTensor",
        "torch.DoubleTensor",
        "torch.cuda.FloatTensor",
        "torch.from_numpy",
        "numpy.array",
        "numpy.asarray",
        "numpy.mean",
        "numpy.sum",
        "builtins.float",
        "float",
    }
)
_CUTTING_METHODS = frozenset({"item", "tolist", "numpy", "detach"})


@dataclass
class _Cut:
    line: int
    how: str  # "`torch.Tensor([l1, l2])`"
    partial: bool  # other terms keep a graph


class _Tracked:
    """Per function: names that hold graphs (losses, outputs, lists of them),
    and names rebuilt from them without one."""

    def __init__(self) -> None:
        self.graph_lists: set[tuple[int, str]] = set()
        self.cut: dict[tuple[int, str], _Cut] = {}


def _key(name: str, ctx: Context) -> tuple[int, str]:
    """A name within its function (names of different functions are different)."""
    return id(ctx.function), name


@rule
class LossRebuiltWithoutGraph(Rule):
    """## What it does
    Flags `backward()` on a loss that was rebuilt from losses or model
    outputs by a call that copies values and leaves the autograd graph
    behind: `torch.tensor(...)`, `torch.Tensor([l1, l2])`,
    `torch.FloatTensor(...)`, `np.array(...)`, `.item()`, `.tolist()`,
    `.numpy()`, `.detach()`, `float(...)`. An error when nothing of the loss
    keeps a graph; a warning when such a term is added to a loss that does
    (that term trains nothing).

    ## Why is this bad?
    A tensor built from values is a new leaf: `backward()` on it raises
    `RuntimeError: element 0 of tensors does not require grad and does not
    have a grad_fn`, or, when it is one term of a sum, contributes a constant
    with zero gradient: the part of the objective it stands for is never
    optimised, and the logged loss still looks right.

    ## Example
    ```python
    import torch

    def step(model, x, y, criterion, optimizer):
        out = model(x)
        losses = [criterion(out, y), out.pow(2).mean()]
        loss = torch.Tensor(losses).sum()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    def step(model, x, y, criterion, optimizer):
        out = model(x)
        losses = [criterion(out, y), out.pow(2).mean()]
        loss = torch.stack(losses).sum()
        loss.backward()
        optimizer.step()
    ```
    """

    code = "TW154"
    name = "loss-rebuilt-without-graph"
    family = "training"
    severity = Severity.ERROR
    message = "{what}"

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if len(node.targets) != 1:
            return
        name = ctx.dotted(node.targets[0])
        if name is None:
            return
        tracked = ctx.helper(_Tracked)
        key = _key(name, ctx)
        tracked.cut.pop(key, None)
        if isinstance(node.value, (ast.List, ast.Tuple)) and any(
            self._has_graph(item, ctx) for item in node.value.elts
        ):
            tracked.graph_lists.add(key)
        cut = self._cut(node.value, ctx)
        if cut is not None:
            tracked.cut[key] = cut

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        name = ctx.dotted(node.target)
        tracked = ctx.helper(_Tracked)
        if name is None or _key(name, ctx) not in tracked.cut:
            return
        if self._has_graph(node.value, ctx):
            tracked.cut[_key(name, ctx)].partial = True

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        tracked = ctx.helper(_Tracked)
        if isinstance(func, ast.Attribute) and func.attr == "append" and node.args:
            owner = ctx.dotted(func.value)
            if owner is not None and self._has_graph(node.args[0], ctx):
                tracked.graph_lists.add(_key(owner, ctx))
            return
        if not (isinstance(func, ast.Attribute) and func.attr == "backward"):
            return
        receiver = func.value
        name = ctx.dotted(receiver)
        cut = tracked.cut.get(_key(name, ctx)) if name is not None else self._cut(receiver, ctx)
        if cut is None:
            return
        if cut.partial:
            what = (
                f"a term of this loss is rebuilt by {cut.how} (line {cut.line}), which drops its "
                "autograd graph: that term adds a constant and trains nothing"
            )
            ctx.report(self, node, severity=Severity.WARNING, what=what)
            return
        what = (
            f"the loss is rebuilt by {cut.how} (line {cut.line}), which copies values and drops "
            "the autograd graph: backward() raises 'element 0 of tensors does not require grad' "
            "(use torch.stack/torch.cat, or keep the sum as a tensor)"
        )
        ctx.report(self, node, what=what)

    # -- what an expression holds ---------------------------------------------------
    def _has_graph(self, expr: ast.AST, ctx: Context) -> bool:
        """Whether ``expr`` holds a loss or a model output with its graph (or a
        list of them)."""
        name = ctx.dotted(expr)
        if name is not None and _key(name, ctx) in ctx.helper(_Tracked).graph_lists:
            return True
        value = ctx.value_of(expr)
        if value is None or ctx.in_no_grad:
            return False
        return value.kind in (F.LOSS, F.OUTPUT) and bool(value.through)

    def _cut(self, expr: ast.expr, ctx: Context) -> _Cut | None:
        """Where ``expr`` rebuilds graph-carrying values without their graph, if
        its result has no graph of its own left."""
        found: _Cut | None = None
        keeps = False
        for node in _terms(expr):
            cut = self._cutting_call(node, ctx)
            if cut is not None:
                found = found or cut
            elif self._has_graph(node, ctx):
                keeps = True
        if found is not None:
            found.partial = keeps
        return found

    def _cutting_call(self, node: ast.AST, ctx: Context) -> _Cut | None:
        while (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and (node.func.attr in ("sum", "mean", "float", "to", "cuda", "requires_grad_"))
        ):
            node = node.func.value  # `torch.Tensor(losses).sum()`: what was summed
        if not isinstance(node, ast.Call):
            return None
        name = ctx.call_name(node) or ""
        if name in _REBUILDERS and node.args and self._feeds_graph(node.args[0], ctx):
            return _Cut(node.lineno, f"`{ctx.text(node)[:60]}`", False)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _CUTTING_METHODS
            and self._has_graph(func.value, ctx)
        ):
            return _Cut(node.lineno, f"`{ctx.text(node)[:60]}`", False)
        return None

    def _feeds_graph(self, expr: ast.expr, ctx: Context) -> bool:
        if isinstance(expr, (ast.List, ast.Tuple)):
            return any(self._feeds_graph(item, ctx) for item in expr.elts)
        while (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in (*_CUTTING_METHODS, "cpu")
        ) or (isinstance(expr, ast.Attribute) and expr.attr == "data"):
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
                expr = expr.func.value
            elif isinstance(expr, ast.Attribute):
                expr = expr.value
        return self._has_graph(expr, ctx)


def _terms(expr: ast.expr) -> list[ast.expr]:
    """The summands of ``a + b - c * d`` (products are one term)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return [*_terms(expr.left), *_terms(expr.right)]
    return [expr]
