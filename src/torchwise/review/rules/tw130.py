"""TW130 index-of-scalar-loss (modules).

The class docstring is its user documentation (`torchwise rules TW130`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix, Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule


@rule
class IndexOfScalarLoss(Rule):
    """## What it does
    Flags `loss.data[0]` (and `loss[0]`) where `loss` is the value of a loss
    function that reduces to one number (the default `reduction="mean"` or
    `"sum"`).

    ## Why is this bad?
    Before PyTorch 0.4 a loss was a 1-element vector and `loss.data[0]` read
    its value. Since 0.4 it is a 0-dimensional tensor, and indexing it raises
    `IndexError: invalid index of a 0-dim tensor`: the training script crashes
    on its first logging step.

    ## Example
    ```python
    loss = criterion(model(x), y)
    loss.backward()
    total += loss.data[0]
    ```

    ## Use instead
    ```python
    loss = criterion(model(x), y)
    loss.backward()
    total += loss.item()
    ```

    ## Fix safety
    Safe: `.item()` returns the Python number `.data[0]` used to.
    """

    code = "TW130"
    name = "index-of-scalar-loss"
    family = "modules"
    severity = Severity.ERROR
    impact = "crash"
    message = "`{text}` indexes a 0-dim loss: IndexError since torch 0.4; use `{base}.item()`"
    fix = Applicability.SAFE

    def visit_Subscript(self, node: ast.Subscript, ctx: Context) -> None:
        index = node.slice
        if not (isinstance(index, ast.Constant) and index.value == 0):
            return
        target = node.value
        base = (
            target.value if isinstance(target, ast.Attribute) and target.attr == "data" else target
        )
        value = ctx.value_of(base)
        # `x.data[0]` on any value known to be 0-dim (a project loss module's
        # output, a reduction), the pre-0.4 idiom this rule is about.
        zero_dim = (
            base is not target
            and value is not None
            and value.tensor is not None
            and value.tensor.dims == ()
        )
        if value is None or (not zero_dim and (value.kind != F.LOSS or "unreduced" in value.flags)):
            return
        if "guessed" in value.flags and value.origin is not None:
            return  # named like a loss, built by something else: `loss = torch.zeros(2)`
        if not isinstance(node.ctx, ast.Load):
            return
        text = ctx.text(base)
        fix = Fix("Use `.item()`", (Edit(*ctx.span(node), f"{text}.item()"),), Applicability.SAFE)
        ctx.report(self, node, fix=fix, text=ctx.text(node), base=text)
