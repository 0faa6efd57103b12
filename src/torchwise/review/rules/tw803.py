"""TW803 ddp-device-ids-mismatch (distributed).

The class docstring is its user documentation (`torchwise rules TW803`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._distributed import DDP

#: A local (per-machine) rank, as code names it.
_LOCAL = re.compile(r"local_rank|LOCAL_RANK|local-rank|%|gpu|device_id", re.IGNORECASE)
#: A global rank, as code names it.
_GLOBAL = re.compile(r"^(?:\w+\.)?(?:rank|global_rank|get_rank\(\)|dist\.get_rank\(\))$")


@rule
class DdpDeviceIdsMismatch(Rule):
    """## What it does
    Flags `DistributedDataParallel(model, device_ids=[i])` where the model
    was put on another device: moved to `rank % torch.cuda.device_count()`
    (or the local rank) while `device_ids` names the global rank, or the
    reverse; or moved with `.cuda()`/`.to("cuda")`, which is the current
    device (`cuda:0` on every rank unless `torch.cuda.set_device` chose
    another), while `device_ids` names each rank's own GPU.

    ## Why is this bad?
    DDP checks that the module's parameters sit on `device_ids[0]`; when
    they do not it raises at construction ("expects ... on device cuda:N"),
    or, with several ranks on one GPU, all ranks compute on `cuda:0` and the
    other GPUs idle, out of memory. On a single node the global rank and the
    local rank agree, so the bug shows only on the first multi-node run.

    ## Example
    ```python
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    def setup(model, rank):
        device = rank % torch.cuda.device_count()
        return DDP(model.to(device), device_ids=[rank])
    ```

    ## Use instead
    ```python
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    def setup(model, rank):
        device = rank % torch.cuda.device_count()
        return DDP(model.to(device), device_ids=[device])
    ```
    """

    code = "TW803"
    name = "ddp-device-ids-mismatch"
    family = "distributed"
    severity = Severity.ERROR
    message = "{what}"
    call_names = DDP

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in DDP:
            return
        ids = keyword(node, "device_ids")
        if ids is None and len(node.args) > 1:
            ids = ast.keyword("device_ids", node.args[1])
        if (
            ids is None
            or not isinstance(ids.value, (ast.List, ast.Tuple))
            or len(ids.value.elts) != 1
        ):
            return
        function = _enclosing(ctx)
        assignments = _assignments(function if function is not None else ctx.module.node)
        given = _resolved(ids.value.elts[0], assignments, ctx)
        if not node.args:
            return
        placed = _placement(node.args[0], node, function, assignments, ctx)
        if placed is None:
            return
        where, index = placed
        if index is None:
            chosen = _set_device(
                function if function is not None else ctx.module.node, node, assignments, ctx
            )
            if chosen is not None or given in ("0", "None"):
                return
            what = (
                f"`device_ids=[{given}]` names each rank's GPU, but {where} puts the model on the "
                "current device, which is cuda:0 on every rank (no `torch.cuda.set_device` "
                "before it): DDP raises, or every rank computes on cuda:0"
            )
            ctx.report(self, node, what=what)
            return
        if index == given or not _disagree(index, given):
            return
        what = (
            f"`device_ids=[{given}]` but {where} puts the model on device `{index}`: they differ "
            "as soon as a rank's global number is not its GPU on this machine (more than one "
            "node), and DDP then raises or trains on the wrong GPU"
        )
        ctx.report(self, node, what=what)


def _disagree(index: str, given: str) -> bool:
    """A global rank against a local one: the classic mix-up (names that say
    nothing either way are not judged)."""
    one_global = bool(_GLOBAL.match(given)) != bool(_GLOBAL.match(index))
    one_local = bool(_LOCAL.search(given)) != bool(_LOCAL.search(index))
    return one_global and one_local


def _enclosing(ctx: Context) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for parent in reversed(ctx.parents):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return parent
    return None


def _assignments(scope: ast.AST) -> dict[str, ast.expr]:
    """Names assigned exactly once in the scope, and their value."""
    found: dict[str, list[ast.expr]] = {}
    for item in subtree(scope):
        if isinstance(item, ast.Assign) and len(item.targets) == 1:
            target = item.targets[0]
            name = Context.dotted(target)
            if name is not None:
                found.setdefault(name, []).append(item.value)
    return {name: values[0] for name, values in found.items() if len(values) == 1}


def _resolved(
    expr: ast.expr, assignments: dict[str, ast.expr], ctx: Context, depth: int = 0
) -> str:
    """The text of an index expression, through names assigned once."""
    name = Context.dotted(expr)
    if name is not None and name in assignments and depth < 3:
        return _resolved(assignments[name], assignments, ctx, depth + 1)
    if isinstance(expr, ast.Call) and Context.dotted(expr.func) == "int" and expr.args:
        return _resolved(expr.args[0], assignments, ctx, depth + 1)
    return ctx.text(expr)


def _device_index(
    expr: ast.expr, assignments: dict[str, ast.expr], ctx: Context, depth: int = 0
) -> str | None:
    """The GPU index a device expression names; "" for the current device; None: unknown."""
    name = Context.dotted(expr)
    if name is not None and name in assignments and depth < 3:
        return _device_index(assignments[name], assignments, ctx, depth + 1)
    if isinstance(expr, ast.Constant):
        if expr.value in ("cuda", "gpu"):
            return ""
        if isinstance(expr.value, str) and expr.value.startswith("cuda:"):
            return expr.value[5:]
        if isinstance(expr.value, int):
            return str(expr.value)
        return None
    if isinstance(expr, ast.JoinedStr) and len(expr.values) == 2:
        prefix, value = expr.values
        if (
            isinstance(prefix, ast.Constant)
            and prefix.value == "cuda:"
            and isinstance(value, ast.FormattedValue)
        ):
            return _resolved(value.value, assignments, ctx, depth + 1)
        return None
    if isinstance(expr, ast.Call) and (ctx.call_name(expr) or "") == "torch.device":
        if len(expr.args) == 2:
            return _resolved(expr.args[1], assignments, ctx, depth + 1)
        if len(expr.args) == 1:
            return _device_index(expr.args[0], assignments, ctx, depth + 1)
        return None
    if isinstance(expr, (ast.Name, ast.Attribute, ast.BinOp)):
        text = _resolved(expr, assignments, ctx, depth + 1)
        dotted_name = re.fullmatch(r"[\w.]+", text) is not None
        return (
            None if dotted_name and "device" in text.lower() else text
        )  # `args.device`: not an index
    return None


def _placement(
    model: ast.expr,
    ddp: ast.Call,
    function: ast.AST | None,
    assignments: dict[str, ast.expr],
    ctx: Context,
) -> tuple[str, str | None] | None:
    """Where the wrapped model was put: (what shows it, its GPU index or None for
    the current device); None when the code does not show it."""
    move = _move(model, assignments, ctx)
    if move is not None:
        return move
    name = Context.dotted(model)
    if name is None or function is None:
        return None
    found = None
    for item in subtree(function):
        if (
            isinstance(item, ast.Call)
            and isinstance(item.func, ast.Attribute)
            and Context.dotted(item.func.value) == name
            and item.lineno < ddp.lineno
        ):
            moved = _move(item, assignments, ctx)
            if moved is not None:
                found = moved
    return found


def _move(
    call: ast.expr, assignments: dict[str, ast.expr], ctx: Context
) -> tuple[str, str | None] | None:
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    where = f"`{ctx.text(call)[:60]}` (line {call.lineno})"
    if call.func.attr == "cuda":
        if not call.args:
            return where, None
        index = _resolved(call.args[0], assignments, ctx)
        return where, index
    if call.func.attr == "to" and call.args:
        device = _device_index(call.args[0], assignments, ctx)
        if device is None:
            return None
        return where, (device or None)
    return None


def _set_device(
    scope: ast.AST, ddp: ast.Call, assignments: dict[str, ast.expr], ctx: Context
) -> str | None:
    """The device a rank made current before the wrap, if the code chooses one
    (``torch.cuda.set_device``, a ``torch.cuda.device`` block, or a per-rank
    ``CUDA_VISIBLE_DEVICES``, under which cuda:0 is each rank's own GPU)."""
    if "CUDA_VISIBLE_DEVICES" in ctx.source or "cuda.device(" in ctx.source:
        return "(chosen per rank)"
    calls = ctx.function.calls if ctx.function is not None else ctx.module.calls
    for call in calls:  # the calls made so far: a helper that sets it (`setup_distributed()`)
        if call.target is not None and E.SETS_CUDA_DEVICE in ctx.project.effects(call.target):
            return "(by a function called before)"
    for item in subtree(scope):
        if (
            isinstance(item, ast.Call)
            and (ctx.call_name(item) or "").endswith("cuda.set_device")
            and item.args
        ):
            return _resolved(item.args[0], assignments, ctx)
    for item in ctx.module_nodes():
        if isinstance(item, ast.Call) and (ctx.call_name(item) or "").endswith("cuda.set_device"):
            return "(elsewhere in the file)"
    return None
