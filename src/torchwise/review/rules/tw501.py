"""TW501 log-of-softmax (numerics).

The class docstring is its user documentation (`torchwise rules TW501`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._numerics import SOFTMAX, producer
from torchwise.review.rules._numerics_stable import (
    LOG_SOFTMAX_NAMES,
    activation_held,
    logged_argument,
    unwrap,
)
from torchwise.review.rules._util import rename_attribute, underflow_severity


@rule
class LogOfSoftmax(Rule):
    """## What it does
    Flags `torch.log(F.softmax(x, dim))` and `x.softmax(dim).log()`, and the
    log of a name that holds a softmax: assigned one earlier, returned by a
    project function, or the output of a model whose last layer is one
    (`probs = F.softmax(logits, -1)` then `torch.log(probs)`). A softmax made
    safe first (`probs + 1e-8`, `probs.clamp(min=1e-8)`) is not flagged.

    ## Why is this bad?
    Softmax underflows to exactly 0 for logits far below the maximum, and
    `log(0)` is `-inf`: the loss becomes infinite and gradients NaN.
    `log_softmax` computes the same values with the log-sum-exp trick and
    never underflows; it is also one kernel instead of two.

    A warning in a file that computes in half precision (`autocast`, a
    `GradScaler`, `.half()`, `float16`), where the underflow starts at a
    logit gap of about 17; elsewhere a hint (`info`): in float32 it takes a
    gap near 100.

    ## Example
    ```python
    import torch
    import torch.nn.functional as F

    log_probs = torch.log(F.softmax(logits, dim=-1))
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    log_probs = F.log_softmax(logits, dim=-1)
    ```

    ## Fix safety
    Safe: `log_softmax` takes the same arguments (`dim`, `dtype`) and computes
    the same function; results differ only where the original lost precision
    (values that underflowed to `-inf` become finite). Offered when the
    softmax is spelled `F.softmax`, `torch.softmax`, `x.softmax` or
    `nn.Softmax(...)`, so the new name resolves where the old one did.
    """

    code = "TW501"
    name = "log-of-softmax"
    family = "numerics"
    severity = Severity.WARNING
    message = "`log` of a softmax underflows to -inf; use `log_softmax`"
    held_message = (
        "`{name}` holds a softmax{where}: its `log` underflows to -inf; "
        "use `log_softmax` on the logits"
    )
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        inner = logged_argument(node, ctx)
        if inner is None:
            return
        held = activation_held(inner, node, ctx)
        if held is not None and held[0] == SOFTMAX:
            where = f" (line {held[1]})" if held[1] is not None else ""
            ctx.report(
                self,
                node,
                severity=underflow_severity(ctx),
                message=self.held_message,
                name=ctx.text(inner),
                where=where,
            )
            return
        if not isinstance(inner, ast.Call) or producer(inner, ctx) != SOFTMAX:
            return
        target = inner.func.func if isinstance(inner.func, ast.Call) else inner.func
        fix = None
        if isinstance(target, ast.Attribute) and target.attr in LOG_SOFTMAX_NAMES:
            rename = rename_attribute(ctx, target, LOG_SOFTMAX_NAMES[target.attr])
            fix = unwrap(ctx, node, inner, rename, "Use `log_softmax`")
        ctx.report(self, node, fix=fix, severity=underflow_severity(ctx))
