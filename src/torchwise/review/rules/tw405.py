"""TW405 legacy-loss-reduction (deprecated).

The class docstring is its user documentation (`torchwise rules TW405`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated import (
    LEGACY_REDUCTION,
    forwarded,
    is_loss,
    legacy_reduction,
)
from torchwise.review.rules._util import in_compat_code, remove_keyword, replace


@rule
class LegacyLossReduction(Rule):
    """## What it does
    Flags `size_average=` and `reduce=` passed to a loss module
    (`nn.MSELoss(size_average=False)`) or a functional loss
    (`F.cross_entropy(..., reduce=False)`).

    ## Why is this bad?
    Both arguments have been deprecated since PyTorch 0.4.1 in favour of the
    single `reduction=` string and warn on every construction or call. When
    present they silently override `reduction=`, and their combinations are
    easy to misread (`reduce=False` wins over any `size_average`).

    ## Example
    ```python
    from torch import nn

    criterion = nn.MSELoss(size_average=False)
    per_sample = nn.CrossEntropyLoss(reduce=False)
    ```

    ## Use instead
    ```python
    from torch import nn

    criterion = nn.MSELoss(reduction="sum")
    per_sample = nn.CrossEntropyLoss(reduction="none")
    ```

    ## Fix safety
    Safe when both values are literals (`True`, `False`, `None`): the fix
    writes exactly the string PyTorch derives from them (`reduce=False` gives
    `"none"`; otherwise `size_average=False` gives `"sum"`; else `"mean"`),
    replacing any `reduction=` they were overriding. Variables get no fix.
    """

    code = "TW405"
    name = "legacy-loss-reduction"
    family = "deprecated"
    severity = Severity.INFO
    message = "`{args}` is deprecated; use `reduction=`"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        legacy = [item for item in node.keywords if item.arg in LEGACY_REDUCTION]
        if not legacy or not is_loss(ctx.call_name(node)):
            return
        if all(forwarded(item) for item in legacy):
            return  # a wrapper passing its caller's `size_average=size_average` along
        size_average, reduce = (keyword(node, name) for name in LEGACY_REDUCTION)
        reduction = legacy_reduction(
            size_average.value if size_average else None, reduce.value if reduce else None
        )
        fix = None
        if reduction is not None and not has_kwargs_splat(node):
            text = f'"{reduction}"'
            existing = keyword(node, "reduction")
            if existing is not None:
                edits = [replace(ctx, existing.value, text)]
                edits += [remove_keyword(ctx, node, item) for item in legacy]
            else:
                edits = [replace(ctx, legacy[0], f"reduction={text}")]
                edits += [remove_keyword(ctx, node, item) for item in legacy[1:]]
            fix = Fix(f"Use `reduction={text}`", tuple(edits), Applicability.SAFE)
        args = ", ".join(f"{item.arg}=" for item in legacy)
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, args=args)
