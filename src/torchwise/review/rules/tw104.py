"""TW104 evaluation-without-eval (training).

The class docstring is its user documentation (`torchwise rules TW104`).
"""

from __future__ import annotations

import ast

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._evaluation import _functions_called_after_eval, is_evaluation_function
from torchwise.review.rules._loops import (
    Effects,
    callee,
    def_line,
    is_model_call,
    top_level_calls,
)


@rule
class EvaluationWithoutEval(Rule):
    """## What it does
    Flags evaluation code (a function named like `evaluate`/`validate`/
    `predict`, or a `torch.no_grad()` block at the top level of a script) that
    runs the model without ever calling `model.eval()`, and that nothing in
    the file calls after `model.eval()`.

    ## Why is this bad?
    In training mode dropout stays on and batch norm normalises with the
    batch's statistics (and updates its running averages with validation
    data). Metrics are noisy and wrong, and the model changes as you measure it.

    ## Example
    ```python
    import torch

    def evaluate(model, loader):
        with torch.no_grad():
            return [model(x) for x, _ in loader]
    ```

    ## Use instead
    ```python
    import torch

    def evaluate(model, loader):
        model.eval()
        with torch.no_grad():
            return [model(x) for x, _ in loader]
    ```
    """

    code = "TW104"
    name = "evaluation-without-eval"
    family = "training"
    severity = Severity.WARNING
    message = (
        "{what} runs the model but never calls `.eval()` "
        "(dropout and batch norm stay in training mode)"
    )

    def __init__(self) -> None:
        self.top_level_no_grad: list[ast.With] = []

    def visit_With(self, node: ast.With, ctx: Context) -> None:
        if ctx.function is None and any(
            ctx.qualname(callee(item.context_expr)) in {"torch.no_grad", "torch.inference_mode"}
            for item in node.items
        ):
            self.top_level_no_grad.append(node)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        effects = Effects(module, ctx)
        eval_callers = _functions_called_after_eval(module)
        for function in module.functions:
            if function.in_module_class or not is_evaluation_function(function):
                continue
            if not any(is_model_call(c) for c in function.calls):
                continue
            if effects.region_does(function.calls, "eval") or effects.region_does(
                function.calls, "backward"
            ):
                continue
            if function.name in eval_callers:
                continue
            ctx.report(self, def_line(function.node), what=f"`{function.name}()`")
        top_level = top_level_calls(module)
        if any(effects.call_does(c, "eval") for c in top_level):
            return
        for block in self.top_level_no_grad:
            first, last = block.lineno, block.end_lineno or block.lineno
            if any(is_model_call(c) and first <= c.line <= last for c in top_level):
                ctx.report(self, block.items[0].context_expr, what="this `no_grad` block")
