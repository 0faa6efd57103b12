"""TW502 sigmoid-before-bce-loss (numerics).

The class docstring is its user documentation (`torchwise rules TW502`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import rule
from torchwise.review.rules._numerics import BCE, SIGMOID, LossInputRule, bce_fix


@rule
class SigmoidIntoBCELoss(LossInputRule):
    """## What it does
    Flags `BCELoss` / `F.binary_cross_entropy` given the output of a sigmoid:
    directly, or through a name assigned from a sigmoid earlier in the same
    function.

    ## Why is this bad?
    `sigmoid` saturates to exactly 0 or 1 in float32 for logits beyond about
    ±17, where the log inside the loss is clamped and the gradient vanishes;
    `BCEWithLogitsLoss` fuses the two with the log-sum-exp trick and stays
    exact. `binary_cross_entropy` is also refused inside float16 autocast,
    while the logits version is autocast-safe.

    ## Example
    ```python
    import torch
    import torch.nn.functional as F

    loss = F.binary_cross_entropy(torch.sigmoid(logits), targets)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    loss = F.binary_cross_entropy_with_logits(logits, targets)
    ```

    ## Fix safety
    Offered only for `F.binary_cross_entropy(torch.sigmoid(z), ...)` written in
    one call, with `weight=`/`reduction=` at most. Unsafe: the result is the
    same function, but `binary_cross_entropy` clamps each log term at -100, so
    confidently wrong predictions (|z| beyond about 100) now contribute their
    true, larger loss, and float results change in the last bits.
    """

    code = "TW502"
    name = "sigmoid-before-bce-loss"
    family = "numerics"
    severity = Severity.INFO
    message = (
        "binary cross-entropy is given sigmoid output; use the `_with_logits` version on the logits"
    )
    fix = Applicability.UNSAFE

    follows_models = True

    def check(
        self, call: ast.AST, loss: str, given: str | None, ctx: Context, note: str = ""
    ) -> None:
        if given != SIGMOID or loss != BCE:
            return
        if isinstance(call, ast.Call) and not note:
            ctx.report(self, call, fix=bce_fix(call, ctx))
        else:
            ctx.report(self, call, message=self.message + note)
