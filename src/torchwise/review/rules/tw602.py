"""TW602 save-whole-module (checkpoints).

The class docstring is its user documentation (`torchwise rules TW602`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._checkpoints import NOT_MODULES, SAVE, state_dict_of
from torchwise.review.rules._modules import is_module_class


@rule
class SaveWholeModule(Rule):
    """## What it does
    Flags `torch.save(model, path)` where `model` is an `nn.Module` (a model
    built or named as one, or `self` inside a module).

    ## Why is this bad?
    Saving the module pickles the object, which stores a reference to its
    class by import path: the checkpoint breaks as soon as the code is
    refactored or moved, and loading it needs `torch.load(weights_only=False)`,
    which executes arbitrary code from the file. A `state_dict` is plain
    tensors that `weights_only=True` loads safely into any compatible model.

    ## Example
    ```python
    import torch

    torch.save(model, "checkpoint.pt")
    ```

    ## Use instead
    ```python
    import torch

    torch.save(model.state_dict(), "checkpoint.pt")
    ```
    """

    code = "TW602"
    name = "save-whole-module"
    family = "checkpoints"
    severity = Severity.WARNING
    in_test_modules = False
    impact = "maintenance"
    message = (
        "`torch.save({name}, ...)` pickles the module and its code: save `{name}.state_dict()`"
    )

    def __init__(self) -> None:
        self.plain: list[set[str]] = [set()]  # per function: names holding dicts, loads, ...

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> None:
        self.plain.append(set())

    visit_AsyncFunctionDef = visit_FunctionDef

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self.plain.pop()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        value = node.value
        plain = isinstance(value, (ast.Dict, ast.DictComp)) or (
            isinstance(value, ast.Call)
            and (state_dict_of(value) is not None or ctx.call_name(value) in NOT_MODULES)
        )
        for target in node.targets:
            name = ctx.dotted(target)
            if name is not None:
                (self.plain[-1].add if plain else self.plain[-1].discard)(name)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in SAVE or not node.args:
            return
        saved = node.args[0]
        name = ctx.dotted(saved)
        if name is None or name in self.plain[-1]:
            return
        if name == "self":
            module = bool(ctx.classes) and is_module_class(ctx, ctx.classes[-1][0])
        else:
            base = (
                saved.value
                if isinstance(saved, ast.Attribute) and saved.attr == "module"
                else saved
            )
            module = ctx.kind_of(base) == F.MODULE
        if module:
            ctx.report(self, node, name=name)
