"""TW150 accumulated-loss-not-scaled (training).

The class docstring is its user documentation (`torchwise rules TW150`).
"""

from __future__ import annotations

import re

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._accumulation import accumulation

#: Optimizers whose update divides by a running scale of the gradient: a
#: constant factor on every gradient is (nearly) undone.
_ADAPTIVE = re.compile(r"(Adam\w*|Adagrad|Adadelta|RMSprop|Adafactor|Lamb|LAMB|Lion|Adan)$")


@rule
class AccumulatedLossNotScaled(Rule):
    """## What it does
    Flags gradient accumulation (`loss.backward()` on every batch,
    `optimizer.step()` under `if (i + 1) % N == 0:`) whose loss is not
    divided by `N` anywhere in the loop.

    ## Why is this bad?
    `backward()` adds each micro-batch's gradient to `.grad`, so the step
    sees the sum of N batch-mean gradients: N times the gradient of one
    batch of N times the size. With SGD that is N times the learning rate
    (a warning); adaptive optimizers (Adam, AdamW, RMSprop, ...) divide most
    of the factor out again, but gradient clipping and weight decay then act
    on a gradient N times larger than the one the settings were chosen for
    (a hint).

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accumulation_steps
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```
    """

    code = "TW150"
    name = "accumulated-loss-not-scaled"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "the optimizer steps every `{divisor}` batches but each batch's loss is not divided by "
        "`{divisor}`: the step applies the sum of {divisor} gradients{effect}"
    )

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        found = accumulation(loop)
        if found is None:
            return
        last = re.escape(found.divisor.rsplit(".", 1)[-1].strip("'\"[]"))
        scaled = re.compile(
            rf"(/=?|\bdiv_?\(|\*\s*\(?\s*1\.?0?\s*/)\s*\(?\s*(?:float\()?[\w.\[\]'\"]*{last}"
        )
        if scaled.search(ctx.text(loop.node)):
            return
        optimizer = found.steps[0].receiver_value
        origin = "" if optimizer is None else optimizer.origin or ""
        adaptive = bool(_ADAPTIVE.search(origin))
        effect = (
            f" (`{origin.rsplit('.', 1)[-1]}` divides most of that out, but clipping and weight "
            "decay see the larger gradient)"
            if adaptive
            else ": the learning rate is in effect multiplied by it"
        )
        ctx.report(
            self,
            found.backwards[0].node,
            severity=Severity.INFO if adaptive else None,
            divisor=found.divisor,
            effect=effect,
        )
