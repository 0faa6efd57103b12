"""TW104 evaluation-without-eval (training).

The class docstring is its user documentation (`torchwise rules TW104`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_false
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._evaluation import (
    functions_called_after_eval,
    is_evaluation_function,
    model_calls,
    models_differ,
)
from torchwise.review.rules._loops import (
    Effects,
    callee,
    def_line,
    is_model_call,
    top_level_calls,
)
from torchwise.review.rules._util import in_test_code


@rule
class EvaluationWithoutEval(Rule):
    """## What it does
    Flags evaluation code that runs a model in training mode: a function named
    like `evaluate`/`validate`/`predict` (or `test`, when it loops over data)
    that runs a model and never calls `model.eval()`, when nothing in the
    project calls it after `model.eval()`; a `torch.no_grad()` block at the top
    level of a script that does the same; and a call such as
    `run_epoch(loader, train=False)` to a function that, on its `train=False`
    path, runs the model without `.eval()`. Only models that behave differently
    in training mode are concerned: one known (across files) to have dropout or
    batch norm, or one whose layers cannot be resolved.

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
    severity = Severity.INFO
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
        if in_test_code(ctx):
            return  # a test runs a model in whichever mode it is checking
        effects = Effects(module, ctx)
        trains = any(
            effects.call_does(c, effect) for c in module.calls for effect in ("train", "backward")
        )
        # Which functions callers run after .eval() takes every call site of the
        # file's functions: asked only once a function would otherwise be flagged.
        eval_callers: set[str] | None = None
        for function in module.functions:
            if function.in_module_class or not is_evaluation_function(function):
                continue
            models = model_calls(function)
            if not models and not effects.region_does(function.calls, E.MODEL_CALL):
                continue
            if any(
                effects.region_does(function.calls, effect)
                for effect in (E.EVAL, E.BACKWARD, E.LEARNS, E.TRAIN)
            ):
                continue
            if not models_differ(models, ctx):
                continue
            if eval_callers is None:
                eval_callers = functions_called_after_eval(module, ctx)
            if function.name in eval_callers:
                continue
            if not trains and _loaded_in_eval_mode(models):
                continue
            ctx.report(self, def_line(function.node), what=f"`{function.name}()`")
        self._flag_calls(module, effects, ctx)
        top_level = top_level_calls(module)
        if any(effects.call_does(c, "eval") for c in top_level):
            return
        for block in self.top_level_no_grad:
            first, last = block.lineno, block.end_lineno or block.lineno
            inside = [c for c in top_level if is_model_call(c) and first <= c.line <= last]
            if (
                inside
                and models_differ(inside, ctx)
                and not (not trains and _loaded_in_eval_mode(inside))
            ):
                ctx.report(self, block.items[0].context_expr, what="this `no_grad` block")

    def _flag_calls(self, module: F.ModuleFacts, effects: Effects, ctx: Context) -> None:
        """``run_epoch(loader, train=False)``: a function that runs the model whichever
        its flag says, and never calls `.eval()` on the `False` path."""
        for call in module.calls:
            target = call.target
            function = ctx.project.function(target)
            if target is None or function is None:
                continue
            for flag in _false_flags(call, function):
                path = ctx.project.path_effects(target, flag, False)
                if E.MODEL_CALL not in path or path & {E.EVAL, E.BACKWARD, E.LEARNS}:
                    continue
                region = _region_calls(module, call)
                if any(
                    effects.call_does(other, "eval") and not F.exclusive(other.branch, call.branch)
                    for other in region
                ):
                    continue  # before it, or after it on what it returns (`wrap(m, False)`)
                what = f"`{ctx.text(call.node.func)}(..., {flag}=False)`"
                ctx.report(self, call.node, what=what)


_FLAG = re.compile(r"^(is_)?(train|training|train_mode|training_mode)$")


def _false_flags(call: F.CallEvent, function: object) -> list[str]:
    """The training-flag parameters this call passes a literal False for."""
    params = [p for p in getattr(function, "params", []) if p not in {"self", "cls"}]
    found = []
    for position_, arg in enumerate(call.node.args):
        if position_ < len(params) and _FLAG.match(params[position_]) and is_false(arg):
            found.append(params[position_])
    for item in call.node.keywords:
        flag = item.arg
        if flag is not None and flag in params and _FLAG.match(flag) and is_false(item.value):
            found.append(flag)
    return found


def _region_calls(module: F.ModuleFacts, call: F.CallEvent) -> list[F.CallEvent]:
    for function in module.functions:
        if call in function.calls:
            return function.calls
    return top_level_calls(module)


def _loaded_in_eval_mode(calls: list[F.CallEvent]) -> bool:
    """Every model run was loaded by a ``from_pretrained`` (Hugging Face and
    diffusers return models in eval mode), in a file that never trains."""
    origins = [(c.callee_value or c.receiver_value) for c in calls]
    return bool(origins) and all(
        value is not None and (value.origin or "").endswith("from_pretrained") for value in origins
    )
