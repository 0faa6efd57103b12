"""TW114 evaluation-with-grad (training).

The class docstring is its user documentation (`torchwise rules TW114`).
"""

from __future__ import annotations

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._evaluation import is_evaluation_function
from torchwise.review.rules._loops import (
    def_line,
    is_backward,
    is_model_call,
)


@rule
class EvaluationWithGrad(Rule):
    """## What it does
    Flags evaluation functions (named like `evaluate`/`validate`/`predict`)
    that run the model with autograd on: no `torch.no_grad()` or
    `torch.inference_mode()` around them, and no `backward()` inside.

    ## Why is this bad?
    Autograd records a graph for every forward: evaluation then needs the
    memory of training (often 2-3x inference) and runs slower, for gradients
    nobody uses.

    ## Example
    ```python
    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(-1) for x, _ in loader]
    ```

    ## Use instead
    ```python
    import torch

    @torch.no_grad()
    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(-1) for x, _ in loader]
    ```
    """

    code = "TW114"
    name = "evaluation-with-grad"
    family = "training"
    severity = Severity.INFO
    default_enabled = False
    message = (
        "`{name}()` runs the model with autograd on; "
        "wrap it in `torch.no_grad()` or `torch.inference_mode()`"
    )

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        for function in module.functions:
            if function.in_module_class or not is_evaluation_function(function):
                continue
            model_calls = [c for c in function.calls if is_model_call(c)]
            if not model_calls or any(c.no_grad for c in model_calls):
                continue
            if any(is_backward(c) for c in function.calls):
                continue
            ctx.report(self, def_line(function.node), name=function.name)
