"""TW118 optimizer-on-replaced-model (training).

The class docstring is its user documentation (`torchwise rules TW118`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context, optimised_model
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import position


@rule
class OptimizerOnReplacedModel(Rule):
    """## What it does
    Flags a model variable that is assigned a new model (a constructor call,
    `torch.load`, a `copy.deepcopy`) after an optimizer was built from its
    parameters, when the optimizer is not rebuilt afterwards but is still used
    to step.

    ## Why is this bad?
    The optimizer holds the parameter tensors it was given, not the variable:
    after `model = torch.load(...)` it keeps updating the old model's
    parameters, which nothing uses any more. The model that runs never trains,
    and nothing errors; the loss just does not go down (or a resumed run
    silently restarts from the restored weights every time).

    ## Example
    ```python
    import torch

    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    model = torch.load("checkpoint.pt", weights_only=False)
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    model = Net()
    model.load_state_dict(torch.load("checkpoint.pt"))
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    ```
    """

    code = "TW118"
    name = "optimizer-on-replaced-model"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    needs_text = ("optim",)  # an optimizer is built in the file: torch.optim, optimizer=...
    message = (
        "`{model}` is replaced after `{optimizer}` was built from its parameters: "
        "the optimizer keeps updating the old model; build it after this line"
    )

    def __init__(self) -> None:
        # per region (function id or 0): (position, model name, optimizer name)
        self.optimizers: dict[int, list[tuple[tuple[int, int], str, str]]] = {}
        # per region: (position, node, names replaced)
        self.replacements: dict[int, list[tuple[tuple[int, int], ast.stmt, list[str]]]] = {}

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        region = id(ctx.function) if ctx.function is not None else 0
        value = node.value
        names = [name for t in node.targets for name in _names(t)]
        if isinstance(value, ast.Call) and ctx.kind_of(value) == F.OPTIMIZER:
            model = optimised_model(value)
            if model is not None and len(names) == 1:
                self.optimizers.setdefault(region, []).append((position(node), model, names[0]))
            return
        if not _builds_new(value, ctx):
            return
        text = ctx.text(value)
        replaced = [name for name in names if not re.search(rf"\b{re.escape(name)}\b", text)]
        if replaced:
            self.replacements.setdefault(region, []).append((position(node), node, replaced))

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._judge(id(function), function.calls, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        inside = {call for function in module.functions for call in function.calls}
        self._judge(0, [c for c in module.calls if c not in inside], ctx)

    def _judge(self, region: int, calls: list[F.CallEvent], ctx: Context) -> None:
        optimizers = self.optimizers.get(region, [])
        for where, node, names in self.replacements.get(region, []):
            for built, model, optimizer in optimizers:
                if model not in names or built >= where:
                    continue
                rebuilt = any(m == model and b > where for b, m, _ in optimizers)
                stepped = any(
                    call.method == "step"
                    and call.receiver == optimizer
                    and position(call.node) > where
                    for call in calls
                )
                if stepped and not rebuilt:
                    ctx.report(self, node, model=model, optimizer=optimizer)
                    break


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _names(element)]
    return []


def _builds_new(value: ast.expr, ctx: Context) -> bool:
    """A call that returns a different model object than any it is given."""
    if not isinstance(value, ast.Call):
        return False
    qualname = ctx.call_name(value) or ""
    if qualname in {"torch.load", "copy.deepcopy"}:
        return True
    found = ctx.value_of(value)
    return (
        found is not None
        and found.kind == F.MODULE
        and isinstance(value.func, ast.Name)  # Net(...), not model.to(...)
    )
