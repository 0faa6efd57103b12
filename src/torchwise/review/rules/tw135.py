"""TW135 assign-training-flag (modules).

The class docstring is its user documentation (`torchwise rules TW135`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_false
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._modules import module_method, self_attribute


@rule
class AssignTrainingFlag(Rule):
    """## What it does
    Flags `self.training = ...` in a method of an `nn.Module` (other than
    `__init__`, `train` and `eval`).

    ## Why is this bad?
    Assigning the flag changes only this module: its children keep their own
    `training` flags, so their dropout and batch norm stay in the old mode.
    `self.train(mode)` and `self.eval()` set the flag on every submodule.

    ## Example
    ```python
    from torch import nn

    class Model(nn.Module):
        def freeze(self):
            self.training = False
    ```

    ## Use instead
    ```python
    from torch import nn

    class Model(nn.Module):
        def freeze(self):
            self.eval()
    ```
    """

    code = "TW135"
    name = "assign-training-flag"
    family = "modules"
    severity = Severity.WARNING
    message = "assigning `self.training` skips the submodules: use `self.train({mode})`"

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        function = ctx.function
        if function is None or function.name in {"__init__", "train", "eval", "__setstate__"}:
            return
        if any(self_attribute(t) == "training" for t in node.targets) and module_method(ctx):
            mode = "False" if is_false(node.value) else ctx.text(node.value)
            ctx.report(self, node, mode=mode)
