"""TW408 assert-allclose (deprecated).

The class docstring is its user documentation (`torchwise rules TW408`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import in_compat_code, rename_attribute


@rule
class AssertAllclose(Rule):
    """## What it does
    Flags `torch.testing.assert_allclose`.

    ## Why is this bad?
    It is deprecated since PyTorch 1.12 (it warns) in favour of
    `torch.testing.assert_close`, which also checks dtype, device and
    layout, and reports where and by how much tensors differ.

    ## Example
    ```python
    import torch

    torch.testing.assert_allclose(actual, expected)
    ```

    ## Use instead
    ```python
    import torch

    torch.testing.assert_close(actual, expected)
    ```

    ## Fix safety
    Unsafe: `assert_close` has tighter default tolerances for float32, treats
    NaN as unequal unless `equal_nan=True`, and checks dtypes, so a passing
    test may start failing (usually revealing a real mismatch).
    """

    code = "TW408"
    name = "assert-allclose"
    family = "deprecated"
    severity = Severity.INFO
    message = "`torch.testing.assert_allclose` is deprecated; use `torch.testing.assert_close`"
    fix = Applicability.UNSAFE

    call_names = frozenset({"torch.testing.assert_allclose"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) != "torch.testing.assert_allclose":
            return
        fix = None
        if isinstance(node.func, ast.Attribute):
            edit = rename_attribute(ctx, node.func, "assert_close")
            fix = Fix("Use `assert_close`", (edit,), Applicability.UNSAFE)
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix)
