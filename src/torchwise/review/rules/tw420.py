"""TW420 legacy-autograd-function (deprecated).

The class docstring is its user documentation (`torchwise rules TW420`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

_FUNCTION = {"torch.autograd.Function", "torch.autograd.function.Function"}


@rule
class LegacyAutogradFunction(Rule):
    """## What it does
    Flags a subclass of `torch.autograd.Function` whose `forward` is an
    instance method (not a `@staticmethod`): the pre-0.4 style, with state
    set in `__init__` and the object called as `Detect(...)(x)`.

    ## Why is this bad?
    PyTorch removed legacy autograd functions: calling one raises
    `RuntimeError: Legacy autograd function with non-static forward method is
    deprecated. Please use new-style autograd function with static forward
    method.` Code written for PyTorch 0.3 (SSD's `Detect`, many CUDA
    extensions' wrappers) fails on its first call.

    ## Example
    ```python
    from torch.autograd import Function

    class Clamp(Function):
        def forward(self, x):
            return x.clamp(0, 1)
    ```

    ## Use instead
    ```python
    from torch.autograd import Function

    class Clamp(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clamp(0, 1)

        @staticmethod
        def backward(ctx, grad):
            return grad
    ```
    """

    code = "TW420"
    name = "legacy-autograd-function"
    family = "deprecated"
    severity = Severity.ERROR
    impact = "crash"
    message = (
        "`{name}.forward` is not a `@staticmethod`: calling a legacy autograd Function "
        "raises on current PyTorch"
    )

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> None:
        if not any(ctx.qualname(base) in _FUNCTION for base in node.bases):
            return
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef) and statement.name == "forward":
                static = any(
                    isinstance(d, ast.Name) and d.id in {"staticmethod", "classmethod"}
                    for d in statement.decorator_list
                )
                if not static:
                    ctx.report(self, node, name=node.name)
                return
