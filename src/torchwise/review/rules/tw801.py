"""TW801 collective-without-process-group (distributed).

The class docstring is its user documentation (`torchwise rules TW801`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._contracts import in_try_body
from torchwise.review.rules._distributed import DISTRIBUTED_GUARD, PROCESS_GROUP_CALLS


@rule
class CollectiveWithoutProcessGroup(Rule):
    """## What it does
    Flags a collective (`dist.barrier()`, `dist.all_reduce(...)`, ...) or
    `dist.get_rank()`/`get_world_size()` called on a path that does not check
    for a process group, in a project that starts its process group on some
    paths only (`if args.distributed: init_process_group(...)`, or after an
    early `return` for a single-process run). A call counts as checked under
    an `if` that tests the distributed setup (`dist.is_initialized()`,
    `args.distributed`, `world_size > 1`, ...), in a `try`, or in a function
    that every caller calls under such a check.

    ## Why is this bad?
    Without a process group each of these raises `ValueError: Default process
    group has not been initialized`: the single-GPU or CPU run the project's
    own code provides for (often the evaluation or a debugging run) crashes,
    typically at the end of an epoch, after the training it was meant to
    evaluate.

    ## Example
    ```python
    import torch.distributed as dist

    def main(args):
        if args.distributed:
            dist.init_process_group("nccl")
        train(args)
        dist.barrier()
    ```

    ## Use instead
    ```python
    import torch.distributed as dist

    def main(args):
        if args.distributed:
            dist.init_process_group("nccl")
        train(args)
        if dist.is_initialized():
            dist.barrier()
    ```
    """

    code = "TW801"
    name = "collective-without-process-group"
    family = "distributed"
    severity = Severity.ERROR
    message = (
        "`{call}` needs a process group, and this project also runs without one (it starts "
        "the group on some paths only, {where}): on a single-process run it raises "
        "'Default process group has not been initialized'"
    )
    call_names = PROCESS_GROUP_CALLS

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in PROCESS_GROUP_CALLS:
            return
        optional = ctx.project.process_group_optional()
        if optional is None:
            return
        if any(DISTRIBUTED_GUARD.search(text) for text, _ in ctx.branch):
            return
        if _guarded_in_expression(node, ctx):
            return
        if in_try_body(ctx, node, frozenset({"RuntimeError", "ValueError", "Exception"})):
            return
        if _started_before(node, ctx):
            return
        function = ctx.function
        if function is not None:
            if DISTRIBUTED_GUARD.search(function.name):
                return  # `reduce_dict`, `all_gather_ddp`: helpers called when distributed
            sites = ctx.project.callers(function.target) if function.target else []
            if not sites and not _entry(function.name, ctx):
                return  # nothing in the project shows it runs on the single-process path
            guarded = (
                any(DISTRIBUTED_GUARD.search(t) for t, _ in site.fact.branch) for site in sites
            )
            if sites and all(guarded):
                return
        where = optional.rsplit("/", 1)[-1]
        ctx.report(self, node, call=ctx.text(node.func) + "()", where=where)


def _guarded_in_expression(node: ast.Call, ctx: Context) -> bool:
    """Checked in its own expression: ``dist.get_rank() if dist.is_initialized()
    else 0``, ``not dist.is_initialized() or dist.get_rank() == 0``."""
    child: ast.AST = node
    for parent in reversed(ctx.parents):
        if isinstance(parent, ast.IfExp) and child is not parent.test:
            if DISTRIBUTED_GUARD.search(ctx.text(parent.test)):
                return True
        elif isinstance(parent, ast.BoolOp):
            earlier = parent.values[: parent.values.index(child)] if child in parent.values else []
            if any(DISTRIBUTED_GUARD.search(ctx.text(value)) for value in earlier):
                return True
        elif isinstance(parent, ast.stmt):
            return False
        child = parent
    return False


def _started_before(node: ast.Call, ctx: Context) -> bool:
    """The same function (or script) started the group earlier on this path."""
    function = ctx.function
    calls = function.calls if function is not None else ctx.module.calls
    return any(
        E.inits_process_group(call)
        and call.line < node.lineno
        and F.implied(call.branch, ctx.branch)
        for call in calls
    )


def _entry(name: str, ctx: Context) -> bool:
    """A function a script runs itself: ``main``, in a file with a ``__main__`` guard."""
    return name == "main" or "__main__" in ctx.source
