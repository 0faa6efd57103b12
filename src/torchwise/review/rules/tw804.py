"""TW804 metric-not-reduced-across-ranks (distributed).

The class docstring is its user documentation (`torchwise rules TW804`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule

_EVALUATION_DATA = re.compile(r"val|valid|test|eval|dev", re.IGNORECASE)
_EVALUATION_FUNCTION = re.compile(
    r"^(evaluate|validate|valid|val|test|eval)\w*$|_(eval|evaluate|validate|test)$"
)
#: What gathers a value from every rank: a collective, or a helper named for one.
_REDUCES = re.compile(
    r"all_reduce|all_gather|\breduce\w*\(|gather\w*\(|broadcast|synchronize_between_processes|"
    r"accelerator\.\w+|reduce_dict|reduce_mean|reduce_tensor|dist\.|sync\w*\("
)
_SAMPLERS = frozenset(
    {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"}
)


class _Sharded:
    """Per file: loaders of evaluation data that a DistributedSampler shards."""

    def __init__(self) -> None:
        self.loaders: dict[str, int] = {}  # name -> line


@rule
class MetricNotReducedAcrossRanks(Rule):
    """## What it does
    Flags an evaluation function (`evaluate`, `validate`, `test`, ...) that
    averages a metric over a loader of evaluation data sharded by a
    `DistributedSampler`, and returns, prints or logs it without any
    collective (`all_reduce`, `all_gather`, a `reduce_dict`-style helper) in
    the function.

    ## Why is this bad?
    A `DistributedSampler` gives each rank a different 1/N of the evaluation
    set. Without a reduction, the figure rank 0 prints (and checkpoints on)
    is the loss or accuracy of its own shard: it differs from the true one,
    differs between ranks, and picks the "best" checkpoint on a sample of
    the data. Reduce the sums and counts across ranks before dividing.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    valid_loader = DataLoader(valid_set, sampler=DistributedSampler(valid_set))

    def evaluate(model, valid_loader):
        total, count = 0.0, 0
        with torch.no_grad():
            for x, y in valid_loader:
                total += loss_fn(model(x), y).item() * len(x)
                count += len(x)
        return total / count
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler

    valid_loader = DataLoader(valid_set, sampler=DistributedSampler(valid_set))

    def evaluate(model, valid_loader):
        sums = torch.zeros(2)
        with torch.no_grad():
            for x, y in valid_loader:
                sums += torch.tensor([loss_fn(model(x), y).item() * len(x), len(x)])
        dist.all_reduce(sums)
        return (sums[0] / sums[1]).item()
    ```
    """

    code = "TW804"
    name = "metric-not-reduced-across-ranks"
    family = "distributed"
    severity = Severity.WARNING
    impact = "results"
    in_test_modules = False
    message = (
        "`{function}` averages over `{loader}`, which a DistributedSampler shards (line {line}), "
        "and never reduces across ranks: the figure it reports is this rank's 1/N of the data"
    )
    needs_text = ("distributedsampler",)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        value = node.value
        if not (
            isinstance(value, ast.Call) and (ctx.call_name(value) or "").endswith("DataLoader")
        ):
            return
        sampler = keyword(value, "sampler")
        if sampler is None or not isinstance(sampler.value, ast.Call):
            return
        if ctx.call_name(sampler.value) not in _SAMPLERS:
            return
        data = sampler.value.args[0] if sampler.value.args else None
        names = [ctx.dotted(target) or "" for target in node.targets]
        shown = " ".join([*names, ctx.text(data) if data is not None else ""])
        if _EVALUATION_DATA.search(shown) and "train" not in shown.lower():
            for name in names:
                if name:
                    ctx.helper(_Sharded).loaders[name.rsplit(".", 1)[-1]] = node.lineno

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        sharded = ctx.helper(_Sharded).loaders
        if not sharded:
            return
        for function in module.functions:
            node = function.node
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if not _EVALUATION_FUNCTION.search(node.name) or function.class_name is not None:
                continue
            text = ctx.text(node)
            if _REDUCES.search(text):
                continue
            for loop in function.loops:
                iterated = (loop.iterated or "").rsplit(".", 1)[-1]
                if iterated not in sharded or not _accumulates(loop.node):
                    continue
                ctx.report(
                    self,
                    _def_line(node, ctx),
                    function=node.name,
                    loader=iterated,
                    line=str(sharded[iterated]),
                )
                break


def _accumulates(loop: ast.AST) -> bool:
    """A running total: ``total += ...``, ``meter.update(...)``, ``values.append(...)``."""
    for node in subtree(loop):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("update", "append", "extend", "add")
        ):
            return True
    return False


def _def_line(node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> ast.AST:
    line = node.lineno
    text = ctx.lines[line - 1] if 0 < line <= len(ctx.lines) else ""
    start = len(text) - len(text.lstrip())
    return ast.Pass(
        lineno=line, col_offset=start, end_lineno=line, end_col_offset=len(text.rstrip())
    )
