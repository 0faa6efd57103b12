"""TW124 forward-called-directly (modules).

The class docstring is its user documentation (`torchwise rules TW124`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix, Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._modules import creates_module, self_attribute
from torchwise.review.rules._util import in_test_code


@rule
class ForwardCalledDirectly(Rule):
    """## What it does
    Flags `module.forward(x)` on a model or submodule, instead of `module(x)`.

    ## Why is this bad?
    `nn.Module.__call__` runs the forward pre-hooks and hooks around
    `forward`: calling `forward` directly skips them, so anything that relies
    on hooks (pruning and weight-norm parametrizations, FSDP, activation
    checkpointing wrappers, `torch.utils.hooks`, profilers) silently does not
    happen. `super().forward(x)` and `Base.forward(self, x)` are fine.

    ## Example
    ```python
    from torch import nn

    model = nn.Linear(4, 2)
    y = model.forward(x)
    ```

    ## Use instead
    ```python
    from torch import nn

    model = nn.Linear(4, 2)
    y = model(x)
    ```

    ## Fix safety
    Unsafe: after the fix the module's hooks run, which is the point, but it
    changes what happens when hooks are registered.
    """

    code = "TW124"
    name = "forward-called-directly"
    family = "modules"
    severity = Severity.INFO
    impact = "results"
    message = "`{receiver}.forward(...)` skips the module's hooks: call `{receiver}(...)`"
    fix = Applicability.UNSAFE

    call_methods = frozenset({"forward"})

    def __init__(self) -> None:
        self.modules: set[tuple[str, str]] = set()  # (class, attr) holding a submodule

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if ctx.in_module_class and ctx.classes and len(node.targets) == 1:
            attr = self_attribute(node.targets[0])
            if attr is not None and creates_module(ctx, node.value) == "submodule":
                self.modules.add((ctx.classes[-1][0].name, attr))

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "forward":
            return
        receiver = func.value
        if not isinstance(receiver, (ast.Name, ast.Attribute)):
            return  # super().forward(x)
        if isinstance(receiver, ast.Name) and (
            receiver.id in {"self", "cls"} or receiver.id[:1].isupper()
        ):
            return
        if ctx.qualname(receiver) is not None:
            return  # nn.Linear.forward(self, x): an explicit base-class call
        if in_test_code(ctx) or _passes_everything_through(node, ctx):
            return
        attr = self_attribute(receiver)
        known = attr is not None and ctx.classes and (ctx.classes[-1][0].name, attr) in self.modules
        if not known and ctx.kind_of(receiver) != F.MODULE:
            return
        text = ctx.text(receiver)
        start, end = ctx.span(func)
        fix = Fix(f"Call `{text}(...)`", (Edit(start, end, text),), Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, receiver=text)


def _passes_everything_through(node: ast.Call, ctx: Context) -> bool:
    """`def forward(self, *args, **kwargs): return self.model.forward(*args, **kwargs)`:
    a wrapper handing its own call on; the wrapper is the module the hooks ran on."""
    function = ctx.function
    return (
        function is not None
        and function.name == "forward"
        and bool(node.args or node.keywords)
        and all(isinstance(arg, ast.Starred) for arg in node.args)
        and all(keyword.arg is None for keyword in node.keywords)
    )
