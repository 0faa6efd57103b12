"""TW407 torch-range (deprecated).

The class docstring is its user documentation (`torchwise rules TW407`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated_tensor import range_fix
from torchwise.review.rules._util import in_compat_code


@rule
class TorchRange(Rule):
    """## What it does
    Flags `torch.range(start, end)`.

    ## Why is this bad?
    Unlike Python's `range` and `torch.arange`, `torch.range` includes its
    end point and always returns floating point: `torch.range(0, 5)` has six
    elements. It is deprecated (it warns) and a classic off-by-one trap when
    code is ported.

    ## Example
    ```python
    import torch

    steps = torch.range(0, 9)
    ```

    ## Use instead
    ```python
    import torch

    steps = torch.arange(0.0, 10.0)
    ```

    ## Fix safety
    Safe, and offered only when `start`, `end` and `step` are integer literals:
    the fix computes the exclusive end (`start + n * step` for the `n`
    elements `torch.range` produces) and writes float literals, so the result
    has the same elements and the same default floating dtype.
    """

    code = "TW407"
    name = "torch-range"
    family = "deprecated"
    severity = Severity.INFO
    message = (
        "`torch.range` includes its end point and is deprecated; use `torch.arange` (end excluded)"
    )
    fix = Applicability.SAFE

    call_names = frozenset({"torch.range"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) != "torch.range":
            return
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=range_fix(node, ctx))
