"""TW105 training-after-eval (training).

The class docstring is its user documentation (`torchwise rules TW105`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    Effects,
    regions,
)


@rule
class TrainingAfterEval(Rule):
    """## What it does
    Flags a loop that trains (calls `backward()`, directly or through a
    function of the same file) after an evaluation in the same loop put the
    model in `.eval()` mode, with no `.train()` call anywhere in the loop.

    ## Why is this bad?
    From the second epoch on, the model trains in evaluation mode: dropout is
    off and batch norm freezes its statistics. Training quietly gets worse and
    nothing errors.

    ## Example
    ```python
    def fit(model, loader, optimizer):
        for epoch in range(10):
            for x, y in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
            model.eval()
    ```

    ## Use instead
    ```python
    def fit(model, loader, optimizer):
        for epoch in range(10):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
            model.eval()
    ```
    """

    code = "TW105"
    name = "training-after-eval"
    family = "training"
    severity = Severity.ERROR
    message = "this loop sets the model to `.eval()` and trains again without `.train()`"

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        effects = Effects(module, ctx)
        for _, loops in regions(module):
            for loop in loops:
                if loop.outer is not None and loop.outer in loops:
                    continue  # judged once, at the outermost loop
                calls = loop.calls
                if not effects.region_does(calls, "eval") or effects.region_does(calls, "train"):
                    continue
                trainer = next((c for c in calls if effects.call_does(c, "backward")), None)
                if trainer is not None:
                    ctx.report(self, trainer.node)
