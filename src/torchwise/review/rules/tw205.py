"""TW205 zero-grad-not-to-none (performance).

The class docstring is its user documentation (`torchwise rules TW205`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_false, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import remove_keyword


@rule
class ZeroGradNotToNone(Rule):
    """## What it does
    Flags `zero_grad(set_to_none=False)`.

    ## Why is this bad?
    Since PyTorch 2.0, `zero_grad()` sets gradients to `None`, which frees
    their memory and skips a memset kernel per parameter; the next
    `backward()` writes the gradient instead of adding to zeros. Keeping zero
    tensors costs memory and time, and is only needed by code that reads
    `.grad` between `zero_grad()` and `backward()`.

    ## Example
    ```python
    optimizer.zero_grad(set_to_none=False)
    ```

    ## Use instead
    ```python
    optimizer.zero_grad()
    ```

    ## Fix safety
    Unsafe: afterwards `p.grad` is `None` rather than zeros until the next
    `backward()`, which breaks code that reads or adds to it in between.
    """

    code = "TW205"
    name = "zero-grad-not-to-none"
    family = "performance"
    severity = Severity.INFO
    default_enabled = False
    message = "`zero_grad(set_to_none=False)` keeps zero tensors: the default frees them"
    fix = Applicability.UNSAFE

    call_methods = frozenset({"zero_grad"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "zero_grad":
            return
        item = keyword(node, "set_to_none")
        if item is None and len(node.args) == 1:
            if is_false(node.args[0]):
                ctx.report(self, node)
            return
        if item is not None and is_false(item.value):
            edit = remove_keyword(ctx, node, item)
            fix = Fix("Use the default `set_to_none=True`", (edit,), Applicability.UNSAFE)
            ctx.report(self, node, fix=fix)
