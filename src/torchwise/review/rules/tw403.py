"""TW403 autograd-variable (deprecated).

The class docstring is its user documentation (`torchwise rules TW403`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_false, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import in_compat_code, replace_fix


@rule
class AutogradVariable(Rule):
    """## What it does
    Flags `torch.autograd.Variable(...)`.

    ## Why is this bad?
    `Variable` has been a no-op wrapper since PyTorch 0.4: tensors carry
    autograd state themselves. The call returns its argument (with
    `requires_grad` set when asked), so it only misleads readers (a style
    hint, off by default; `Variable(x, volatile=True)`, which is not harmless,
    is TW419).

    ## Example
    ```python
    from torch.autograd import Variable

    x = Variable(batch)
    w = Variable(torch.randn(3), requires_grad=True)
    ```

    ## Use instead
    ```python
    x = batch
    w = torch.randn(3, requires_grad=True)
    ```

    ## Fix safety
    Safe when the call has a single argument and no keywords: it is replaced by
    that argument. Calls with `requires_grad=` are left to you.
    """

    code = "TW403"
    name = "autograd-variable"
    family = "deprecated"
    severity = Severity.INFO
    default_enabled = False
    message = "`torch.autograd.Variable` is a deprecated no-op; use the tensor itself"
    fix = Applicability.SAFE

    call_names = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in {
            "torch.autograd.Variable",
            "torch.autograd.variable.Variable",
        }:
            return
        volatile = keyword(node, "volatile")
        if volatile is not None and not is_false(volatile.value):
            return  # TW419: not a harmless no-op
        fix = None
        if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
            fix = replace_fix(ctx, node, ctx.text(node.args[0]), "Remove the `Variable` wrapper")
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix)
