"""TW138 train-method-override (modules).

The class docstring is its user documentation (`torchwise rules TW138`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import ClassFrame, Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import def_line


@rule
class TrainMethodOverride(Rule):
    """## What it does
    Flags an `nn.Module` subclass that defines `train` as something other than
    `nn.Module.train(mode=True)`: a training routine (`def train(self, loader,
    epochs)`), or any `train` that never switches modes (no
    `super().train(mode)`, no `child.train(mode)`, no `self.training = mode`).

    ## Why is this bad?
    `nn.Module.eval()` is implemented as `self.train(False)`, and every parent
    module's `.train()`/`.eval()` calls `.train(mode)` on each child. With the
    override, `model.eval()` runs the training routine with `loader=False` (or
    raises a `TypeError`), and the mode of the module and its children never
    changes: dropout and batch norm stay in whatever mode they were.

    ## Example
    ```python
    from torch import nn

    class Classifier(nn.Module):
        def train(self, loader, epochs):
            for epoch in range(epochs):
                ...
    ```

    ## Use instead
    ```python
    from torch import nn

    class Classifier(nn.Module):
        def fit(self, loader, epochs):
            self.train()
            for epoch in range(epochs):
                ...
    ```
    """

    code = "TW138"
    name = "train-method-override"
    family = "modules"
    severity = Severity.ERROR
    message = (
        "`{cls}.train` replaces `nn.Module.train(mode)`: `.eval()` calls `self.train(False)`, "
        "so it runs this instead of switching modes; rename it"
    )

    def leave_class(self, frame: ClassFrame, ctx: Context) -> None:
        node = frame.node
        if len(ctx.classes) > 1:
            return
        klass = ctx.project.klass(f"<local>.{node.name}")
        if klass is None or not klass.is_module or not klass.train_override:
            return
        method = next(
            (
                item
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and item.name == "train"
            ),
            None,
        )
        if method is not None:
            ctx.report(self, def_line(method), cls=node.name)
