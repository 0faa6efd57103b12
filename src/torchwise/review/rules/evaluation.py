"""Evaluation-mode rules: `.eval()`/`.train()` and autograd during evaluation."""

from __future__ import annotations

import ast
import re

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    Effects,
    callee,
    def_line,
    is_backward,
    is_eval,
    is_model_call,
    local_callee,
    position,
    regions,
    top_level_calls,
)

_EVAL_NAME = re.compile(
    r"^(_?)(evaluate|evaluation|eval|validate|validation|val|predict|inference|infer|"
    r"run_eval\w*|run_validation|compute_metrics)(_(model|epoch|loop|all|dataset|loader))?$"
    r"|_(evaluate|eval|validate|validation)$"
)


def is_evaluation_function(function: F.FunctionFacts) -> bool:
    return bool(_EVAL_NAME.match(function.name)) and not function.name.endswith("_step")


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
        effects = Effects(module)
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


def _functions_called_after_eval(module: F.ModuleFacts) -> set[str]:
    """Names of local functions that some caller invokes after a `.eval()` call."""
    names: set[str] = set()
    scopes: list[list[F.CallEvent]] = [f.calls for f in module.functions]
    scopes.append(top_level_calls(module))
    for calls in scopes:
        evals = [position(c.node) for c in calls if is_eval(c)]
        if not evals:
            continue
        first_eval = min(evals)
        for call in calls:
            name = local_callee(call)
            if name is not None and position(call.node) > first_eval:
                names.add(name)
    return names


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
        effects = Effects(module)
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
