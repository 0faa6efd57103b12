"""TW153 sigmoid-before-bce-with-logits (numerics).

The class docstring is its user documentation (`torchwise rules TW153`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import rule
from torchwise.review.rules._numerics import BCE_LOGITS, SIGMOID, LossInputRule


@rule
class SigmoidIntoBceWithLogits(LossInputRule):
    """## What it does
    Flags `BCEWithLogitsLoss` / `F.binary_cross_entropy_with_logits` given
    the output of a sigmoid: directly, through a name assigned from one, or
    from a model whose last layer is `nn.Sigmoid()`.

    ## Why is this bad?
    The loss applies the sigmoid itself: given probabilities it takes a
    sigmoid of a sigmoid, whose output stays between 0.5 and 0.73. The loss
    can never reach its targets, its gradient is squashed, and the model
    trains far slower or toward the wrong probabilities, with no error.

    ## Example
    ```python
    import torch
    from torch import nn

    criterion = nn.BCEWithLogitsLoss()
    loss = criterion(torch.sigmoid(logits), targets)
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    criterion = nn.BCEWithLogitsLoss()
    loss = criterion(logits, targets)
    ```
    """

    code = "TW153"
    name = "sigmoid-before-bce-with-logits"
    family = "numerics"
    severity = Severity.ERROR
    message = (
        "`BCEWithLogitsLoss` is given sigmoid output{note}: it applies a sigmoid itself; "
        "pass the logits"
    )

    follows_models = True

    def check(
        self, call: ast.AST, loss: str, given: str | None, ctx: Context, note: str = ""
    ) -> None:
        if given == SIGMOID and loss == BCE_LOGITS:
            ctx.report(self, call, note=note)
