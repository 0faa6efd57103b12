"""TW413 deprecated-weight-norm (deprecated).

The class docstring is its user documentation (`torchwise rules TW413`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated_moved import WEIGHT_NORM
from torchwise.review.rules._util import in_compat_code


@rule
class DeprecatedWeightNorm(Rule):
    """## What it does
    Flags `torch.nn.utils.weight_norm` and `remove_weight_norm`.

    ## Why is this bad?
    The hook-based implementation is deprecated (it warns) in favour of
    `torch.nn.utils.parametrizations.weight_norm`, which works with
    `torch.compile`, `deepcopy` and `state_dict` round trips.

    ## Example
    ```python
    from torch import nn

    conv = nn.utils.weight_norm(nn.Conv1d(16, 16, 3))
    ```

    ## Use instead
    ```python
    from torch import nn

    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(16, 16, 3))
    ```
    """

    code = "TW413"
    name = "deprecated-weight-norm"
    family = "deprecated"
    severity = Severity.INFO
    message = (
        "`{old}` is deprecated; use `{new}` (state_dict keys change: "
        "`weight_g`/`weight_v` become `parametrizations.weight.original0/1`)"
    )

    call_names = frozenset(WEIGHT_NORM)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        if qualname in WEIGHT_NORM:
            if in_compat_code(ctx):
                return  # deliberate compatibility code for older torch
            ctx.report(self, node, old=qualname, new=WEIGHT_NORM[qualname])
