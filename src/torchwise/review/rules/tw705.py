"""TW705 in-place-write-through-alias (tensors).

The class docstring is its user documentation (`torchwise rules TW705`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import name_uses
from torchwise.review.registry import Rule, rule

#: Ways of taking a second name for a tensor that read as taking a copy.
_COPY_LOOKING = {"assigned": "`{alias} = {base}`", "detach": "`.detach()`", "data": "`.data`"}
#: In-place methods that change no element (only a flag or the metadata).
_NOT_WRITES = {"requires_grad_", "share_memory_", "retain_grad", "resize_", "detach_"}


@dataclass
class _Write:
    node: ast.AST
    alias: str
    base: str
    alias_line: int
    how: str


@rule
class InPlaceWriteThroughAlias(Rule):
    """## What it does
    Flags an in-place write (`b += x`, `b[i] = v`, `b.zero_()`, ...) to a name
    that is not a copy of another tensor but the same storage: bound by plain
    assignment (`b = a`), by `.detach()` or by `.data`, when the original is
    read again afterwards in the same function.

    ## Why is this bad?
    `.detach()` and `.data` share the tensor's memory, and `b = a` binds a
    second name to the same tensor: the write changes `a` too. The classic
    case is a DQN target built as `q_target = q_eval.detach()` and then
    written at the taken actions: `q_eval` changes with it, so the loss at
    those actions is zero (with `.data`) or backward fails with "one of the
    variables needed for gradient computation has been modified by an inplace
    operation" (with `.detach()`).

    ## Example
    ```python
    import torch
    import torch.nn.functional as F
    from torch import nn

    net = nn.Linear(4, 2)

    def dqn_loss(states, actions, targets):
        q_eval = net(states)
        q_target = q_eval.detach()
        q_target[torch.arange(len(actions)), actions] = targets
        return F.mse_loss(q_eval, q_target)
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn.functional as F
    from torch import nn

    net = nn.Linear(4, 2)

    def dqn_loss(states, actions, targets):
        q_eval = net(states)
        q_target = q_eval.detach().clone()
        q_target[torch.arange(len(actions)), actions] = targets
        return F.mse_loss(q_eval, q_target)
    ```
    """

    code = "TW705"
    name = "in-place-write-through-alias"
    family = "tensors"
    severity = Severity.ERROR
    impact = "results"
    message = (
        "`{alias}` is `{base}` ({how} shares its storage, line {alias_line}): this in-place "
        "write changes `{base}` too, which is read again on line {read}"
    )

    def __init__(self) -> None:
        self.writes: dict[int, list[_Write]] = {}  # id of the function node (0: module)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        self._write(node, node.target, ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        for target in node.targets:
            if isinstance(target, ast.Subscript):
                self._write(node, target.value, ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr.endswith("_")
            and not func.attr.endswith("__")
            and func.attr not in _NOT_WRITES
        ):
            self._write(node, func.value, ctx)

    def _write(self, node: ast.AST, written: ast.expr, ctx: Context) -> None:
        if isinstance(written, ast.Attribute) and written.attr in {"data", "T", "mT"}:
            return  # `p.data.clamp_()`: written through the view on purpose, no second name
        alias = ctx.dotted(written)
        value = ctx.value_of(written) if alias is not None else None
        if alias is None or value is None or value.kind not in (F.TENSOR, F.OUTPUT, F.LOSS):
            return
        info = value.tensor
        if info is None or info.alias is None or info.alias_kind not in _COPY_LOOKING:
            return
        if info.alias == alias:
            return
        how = _COPY_LOOKING[info.alias_kind].format(alias=alias, base=info.alias)
        scope = id(ctx.function.node) if ctx.function is not None else 0
        self.writes.setdefault(scope, []).append(
            _Write(node, alias, info.alias, info.alias_line, how)
        )

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._judge(self.writes.pop(id(function.node), []), function.node, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._judge(self.writes.pop(0, []), module.node, ctx)

    def _judge(self, writes: list[_Write], scope: ast.AST, ctx: Context) -> None:
        if not writes:
            return
        uses = name_uses(scope)
        for write in writes:
            line = getattr(write.node, "lineno", 0)
            base_uses = sorted(uses.get(write.base, []))
            rebound = [at for at, _, store in base_uses if store and at > write.alias_line]
            reads = [
                at
                for at, _, store in base_uses
                if not store and at > line and not any(write.alias_line < r <= at for r in rebound)
            ]
            if reads:
                ctx.report(
                    self,
                    write.node,
                    alias=write.alias,
                    base=write.base,
                    how=write.how,
                    alias_line=str(write.alias_line),
                    read=str(reads[0]),
                )
