"""TW412 deprecated-upsample (deprecated).

The class docstring is its user documentation (`torchwise rules TW412`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated_moved import UPSAMPLE
from torchwise.review.rules._util import add_keyword, in_compat_code, rename_attribute


@rule
class DeprecatedUpsample(Rule):
    """## What it does
    Flags `F.upsample`, `F.upsample_nearest`, `F.upsample_bilinear`,
    `nn.UpsamplingNearest2d` and `nn.UpsamplingBilinear2d`.

    ## Why is this bad?
    They are deprecated wrappers of `F.interpolate` / `nn.Upsample` (the
    functions warn on every call). The bilinear ones also hard-code
    `align_corners=True`, which differs from `interpolate`'s default and is a
    common source of off-by-half-a-pixel mismatches when code is ported.

    ## Example
    ```python
    import torch.nn.functional as F

    y = F.upsample_bilinear(x, scale_factor=2)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    y = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
    ```

    ## Fix safety
    Safe: the fix spells out the `mode=` and `align_corners=` the wrapper
    passes, with the arguments in the same order (the modules are subclasses
    of `nn.Upsample` that do exactly this). Offered when the old name is
    written with a module prefix (`F.`, `nn.`).
    """

    code = "TW412"
    name = "deprecated-upsample"
    family = "deprecated"
    severity = Severity.INFO
    message = "`{old}` is deprecated; use `{new}`"
    fix = Applicability.SAFE

    call_names = frozenset(UPSAMPLE)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        if qualname not in UPSAMPLE:
            return
        new, extra = UPSAMPLE[qualname]
        fix = None
        arguments_fit = len(node.args) <= (2 if extra else 5) and not has_kwargs_splat(node)
        starred = any(isinstance(arg, ast.Starred) for arg in node.args)
        if isinstance(node.func, ast.Attribute) and arguments_fit and not starred:
            edits = [rename_attribute(ctx, node.func, new)]
            if extra:
                edits.append(add_keyword(ctx, node, extra))
            fix = Fix(f"Use `{new}`", tuple(edits), Applicability.SAFE)
        old = qualname.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn.")
        shown = f"F.{new}" if old.startswith("F.") else f"nn.{new}"
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, old=old, new=f"{shown}({extra})" if extra else shown)
