"""TW156 copy-into-trained-model (training).

The class docstring is its user documentation (`torchwise rules TW156`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.engine.values import optimised_model
from torchwise.review.registry import Rule, rule

_IN_PLACE = frozenset({"copy_", "mul_", "add_", "lerp_", "sub_", "addcmul_", "set_"})


class _Models:
    """Per file: the models an optimizer updates, names copied from them, and
    the updates waiting for the end of their function (or module)."""

    def __init__(self) -> None:
        self.optimized: set[str] = set()
        self.copies: dict[str, str] = {}  # copy -> original (``target = copy.deepcopy(model)``)
        #: id of the enclosing function (0: top level) -> (node, written, read, how)
        self.updates: dict[int, list[tuple[ast.AST, str, str, str]]] = {}


@rule
class CopyIntoTrainedModel(Rule):
    """## What it does
    Flags an update that writes a copy's weights into the model an
    optimizer trains, in code that trains: `policy_net.load_state_dict(
    target_net.state_dict())`, or a soft update whose loop over
    `zip(target.parameters(), model.parameters())` writes (`copy_`, `mul_`,
    `add_`, `lerp_`) the trained model's parameters instead of the target's.
    The trained model is the one an optimizer is built on; the copy is a
    model no optimizer updates (a target network, an EMA).

    ## Why is this bad?
    A target network or an EMA is meant to follow the trained model. Written
    the other way round, every sync throws away what the optimizer learned
    since the last one and puts back the stale copy: DQN's Q-network never
    improves past the first sync, an EMA's model is reset to its average.
    Nothing fails; the returns or the loss just stop improving.

    ## Example
    ```python
    import copy

    import torch

    target_net = copy.deepcopy(policy_net)
    optimizer = torch.optim.Adam(policy_net.parameters())
    for step in range(steps):
        optimizer.zero_grad()
        loss(policy_net, target_net).backward()
        optimizer.step()
        if step % sync_every == 0:
            policy_net.load_state_dict(target_net.state_dict())
    ```

    ## Use instead
    ```python
    import copy

    import torch

    target_net = copy.deepcopy(policy_net)
    optimizer = torch.optim.Adam(policy_net.parameters())
    for step in range(steps):
        optimizer.zero_grad()
        loss(policy_net, target_net).backward()
        optimizer.step()
        if step % sync_every == 0:
            target_net.load_state_dict(policy_net.state_dict())
    ```
    """

    code = "TW156"
    name = "copy-into-trained-model"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "{how} writes `{source}`'s weights into `{trained}`, the model the optimizer trains "
        "(`{source}` has no optimizer): the sync runs backwards and discards what was learned; "
        "write into `{source}` instead"
    )

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        models = ctx.helper(_Models)
        value = node.value
        if not isinstance(value, ast.Call) or len(node.targets) != 1:
            return
        target = ctx.dotted(node.targets[0])
        if ctx.kind_of(value) == F.OPTIMIZER:
            model = optimised_model(value)
            if model is not None:
                models.optimized.add(model)
        elif target is not None and (ctx.call_name(value) or "") == "copy.deepcopy" and value.args:
            original = ctx.dotted(value.args[0])
            if original is not None:
                models.copies[target] = original

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "load_state_dict" and node.args):
            return
        source = node.args[0]
        if not (
            isinstance(source, ast.Call)
            and isinstance(source.func, ast.Attribute)
            and source.func.attr == "state_dict"
        ):
            return
        written, read = ctx.dotted(func.value), ctx.dotted(source.func.value)
        if written is None or read is None:
            return
        self._judge(node, written, read, "`load_state_dict`", ctx)

    def visit_For(self, node: ast.For, ctx: Context) -> None:
        pairs = _zipped_parameters(node, ctx)
        if pairs is None:
            return
        for statement in subtree(node):
            if not isinstance(statement, ast.Call) or not isinstance(statement.func, ast.Attribute):
                continue
            if statement.func.attr not in _IN_PLACE:
                continue
            receiver = statement.func.value
            if isinstance(receiver, ast.Attribute) and receiver.attr == "data":
                receiver = receiver.value
            variable = ctx.dotted(receiver)
            if variable not in pairs:
                continue
            written = pairs[variable]
            others = [model for name, model in pairs.items() if name != variable]
            if others:
                self._judge(statement, written, others[0], "the soft update", ctx)
                return

    def _judge(self, node: ast.AST, written: str, read: str, how: str, ctx: Context) -> None:
        region = id(ctx.function) if ctx.function is not None else 0
        ctx.helper(_Models).updates.setdefault(region, []).append((node, written, read, how))

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._report(id(function), function.calls, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._report(0, module.calls, ctx)

    def _report(self, region: int, calls: list[F.CallEvent], ctx: Context) -> None:
        models = ctx.helper(_Models)
        for node, written, read, how in models.updates.pop(region, []):
            if written not in models.optimized or read in models.optimized:
                continue
            if models.copies.get(read) != written and not _copy_name(read):
                continue  # not evidently a copy of the trained model
            if not _trains(calls, ctx):
                continue  # loading averaged weights to evaluate or export them
            ctx.report(self, node, how=how, source=read, trained=written)


def _copy_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return any(
        word in last for word in ("target", "ema", "average", "avg", "shadow", "momentum", "old")
    )


def _trains(calls: list[F.CallEvent], ctx: Context) -> bool:
    """The code around the update trains: it backpropagates or steps, itself
    or through the project functions it calls."""
    for call in calls:
        if E.learns(call) or E.is_optimizer_step(call):
            return True
        if call.target is not None and ctx.project.effects(call.target) & {E.STEP, E.LEARNS}:
            return True
    return False


def _zipped_parameters(node: ast.For, ctx: Context) -> dict[str, str] | None:
    """``for a, b in zip(x.parameters(), y.parameters())``: {"a": "x", "b": "y"}."""
    iterated, target = node.iter, node.target
    if not (
        isinstance(iterated, ast.Call)
        and isinstance(iterated.func, ast.Name)
        and iterated.func.id == "zip"
        and isinstance(target, ast.Tuple)
        and len(target.elts) == len(iterated.args) == 2
    ):
        return None
    pairs = {}
    for element, argument in zip(target.elts, iterated.args, strict=True):
        if not (
            isinstance(element, ast.Name)
            and isinstance(argument, ast.Call)
            and isinstance(argument.func, ast.Attribute)
            and argument.func.attr in ("parameters", "buffers")
        ):
            return None
        model = ctx.dotted(argument.func.value)
        if model is None:
            return None
        pairs[element.id] = model
    return pairs
