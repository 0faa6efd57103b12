"""TW127 softmax-before-cross-entropy (numerics).

The class docstring is its user documentation (`torchwise rules TW127`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import rule
from torchwise.review.rules._numerics import CE, NLL, SOFTMAX, LossInputRule


@rule
class SoftmaxIntoCrossEntropy(LossInputRule):
    """## What it does
    Flags `CrossEntropyLoss` / `F.cross_entropy` and `NLLLoss` / `F.nll_loss`
    given the output of a softmax: directly, or through a name assigned from a
    softmax earlier in the same function.

    ## Why is this bad?
    `cross_entropy` applies `log_softmax` itself and expects raw logits; given
    probabilities it takes a softmax of a softmax, so the loss barely moves
    and gradients all but vanish: the model trains slowly or not at all, with
    no error. `nll_loss` expects log-probabilities; given probabilities it
    computes a meaningless (negative) loss.

    ## Example
    ```python
    import torch.nn.functional as F
    from torch import nn

    criterion = nn.CrossEntropyLoss()
    probs = F.softmax(logits, dim=1)
    loss = criterion(probs, labels)
    nll = F.nll_loss(F.softmax(logits, dim=1), labels)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F
    from torch import nn

    criterion = nn.CrossEntropyLoss()
    loss = criterion(logits, labels)
    probs = F.softmax(logits, dim=1)  # for metrics only
    nll = F.nll_loss(F.log_softmax(logits, dim=1), labels)
    ```
    """

    code = "TW127"
    name = "softmax-before-cross-entropy"
    family = "numerics"
    severity = Severity.ERROR
    message = "{loss} is given softmax probabilities; {advice}"

    follows_models = True

    def check(
        self, call: ast.AST, loss: str, given: str | None, ctx: Context, note: str = ""
    ) -> None:
        if given != SOFTMAX or loss not in (CE, NLL):
            return
        if loss == CE:
            advice = "it applies log_softmax itself: pass the raw logits" + note
            ctx.report(self, call, loss="cross-entropy", advice=advice)
        else:
            advice = "it expects log-probabilities: use `log_softmax`" + note
            ctx.report(self, call, loss="NLL loss", advice=advice)
