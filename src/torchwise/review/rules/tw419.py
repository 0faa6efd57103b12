"""TW419 variable-volatile-ignored (deprecated).

The class docstring is its user documentation (`torchwise rules TW419`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_false, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import in_compat_code

_VARIABLE = {"torch.autograd.Variable", "torch.autograd.variable.Variable"}


@rule
class VariableVolatileIgnored(Rule):
    """## What it does
    Flags `Variable(x, volatile=True)`.

    ## Why is this bad?
    `volatile=True` was how PyTorch before 0.4 turned autograd off for
    inference. Since 0.4 the argument is accepted and ignored (with a warning
    printed once): the code that relied on it now records the whole graph,
    holding the memory of training and running slower, during every evaluation
    or sampling pass.

    ## Example
    ```python
    from torch.autograd import Variable

    outputs = model(Variable(images, volatile=True))
    ```

    ## Use instead
    ```python
    import torch

    with torch.no_grad():
        outputs = model(images)
    ```
    """

    code = "TW419"
    name = "variable-volatile-ignored"
    family = "deprecated"
    severity = Severity.INFO
    impact = "performance"
    message = (
        "`Variable(..., volatile=True)` has had no effect since torch 0.4: "
        "autograd stays on; use `torch.no_grad()`"
    )

    call_names = frozenset(_VARIABLE)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in _VARIABLE:
            return
        volatile = keyword(node, "volatile")
        if volatile is None or is_false(volatile.value) or in_compat_code(ctx):
            return
        ctx.report(self, node)
