"""TW604 unseeded-training-script (checkpoints).

The class docstring is its user documentation (`torchwise rules TW604`).
"""

from __future__ import annotations

import ast

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._checkpoints import _SEEDING_WORDS, _called_name, _loop_header, _trains


@rule
class UnseededTrainingScript(Rule):
    """## What it does
    Flags a training script (a file with an `if __name__ == "__main__":` entry
    point and a loop that calls `backward()` and steps an optimizer) that
    never seeds its random number generators: no `torch.manual_seed`,
    `random.seed`, `np.random.seed`, `seed_everything`, `set_seed` or any
    other call whose name mentions `seed`. Reported once, at the first
    training loop.

    ## Why is this bad?
    Weight initialisation, data shuffling, augmentation and dropout then
    differ on every run: results cannot be reproduced, two runs cannot be
    compared fairly, and a bug that appears once may never appear again.

    ## Example
    ```python
    import torch

    def main():
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    if __name__ == "__main__":
        main()
    ```

    ## Use instead
    ```python
    import torch

    def main():
        torch.manual_seed(0)
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    if __name__ == "__main__":
        main()
    ```
    """

    code = "TW604"
    name = "unseeded-training-script"
    family = "checkpoints"
    severity = Severity.WARNING
    message = "this training script never seeds its random generators: runs are not reproducible"

    def __init__(self) -> None:
        self.entry_point = False

    def visit_If(self, node: ast.If, ctx: Context) -> None:
        test = node.test
        if (
            not ctx.functions
            and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
        ):
            self.entry_point = True

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if not self.entry_point:
            return
        for call in module.calls:
            name = call.qualname or call.method or _called_name(call.node)
            if name and any(word in name.lower() for word in _SEEDING_WORDS):
                return
        loops = [*module.loops, *(loop for f in module.functions for loop in f.loops)]
        training = [loop for loop in loops if _trains(loop)]
        if training:
            first = min(training, key=lambda loop: getattr(loop.node, "lineno", 0))
            ctx.report(self, _loop_header(first.node))
