"""TW114 evaluation-with-grad (training).

The class docstring is its user documentation (`torchwise rules TW114`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._checkpoints import loop_header as loop_header
from torchwise.review.rules._evaluation import is_evaluation_function, model_calls
from torchwise.review.rules._loops import (
    Effects,
    innermost_loop_is,
    is_eval,
    is_model_call,
    is_optimizer_step,
    is_tensor_backward,
)


@rule
class EvaluationWithGrad(Rule):
    """## What it does
    Flags evaluation and sampling code that runs a known model with autograd
    on: a function named like `evaluate`/`validate`/`predict`, `test` (looping
    over data) or `sample_*`/`generate`, with no `torch.no_grad()` or
    `torch.inference_mode()` around its model calls, no `backward()` anywhere
    it reaches, not called under `no_grad` by every caller, and not returning
    the model's output (callers may train through it). Also a periodic
    evaluation pass on test data inside a training loop (`if step % 100 == 0:
    model(test_x)`). Only models the code or the project index identifies (a
    class, a torchvision constructor, a layer) are concerned.

    ## Why is this bad?
    Autograd records a graph for every forward: evaluation then needs the
    memory of training (often 2-3x inference) and runs slower, for gradients
    nobody uses. On a large validation set it is the difference between
    fitting on the GPU and running out of memory.

    ## Example
    ```python
    from torchvision.models import resnet18

    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(-1).tolist() for x, _ in loader]

    evaluate(resnet18(), val_loader)
    ```

    ## Use instead
    ```python
    import torch
    from torchvision.models import resnet18

    @torch.no_grad()
    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(-1).tolist() for x, _ in loader]

    evaluate(resnet18(), val_loader)
    ```
    """

    code = "TW114"
    name = "evaluation-with-grad"
    family = "training"
    severity = Severity.INFO
    in_test_modules = False
    impact = "performance"
    message = (
        "{what} runs the model with autograd on; "
        "wrap it in `torch.no_grad()` or `torch.inference_mode()`"
    )

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        effects = Effects(module, ctx)
        for function in module.functions:
            if function.in_module_class or function.no_grad:
                continue
            found = _evaluation(function, effects)
            if found is None:
                continue
            where, what = found
            if any(
                effects.region_does(function.calls, effect)
                for effect in (E.BACKWARD, E.LEARNS, E.STEP)
            ):
                continue
            if any(_asks_for_gradients(call) for call in function.calls):
                continue  # an attack, a saliency map: it needs the graph
            fact = ctx.project.function(function.target)
            returned = None if fact is None else fact.returns
            graph = returned is not None and returned.kind in _GRAPH
            if graph and returned is not None and "detached" not in returned.flags:
                continue  # returns the model's output: a caller may train through it
            if _always_called_without_grad(function.target, ctx):
                continue
            ctx.report(self, where, what=what)

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        """A periodic test pass inside a training loop: `if step % 50 == 0: model(test_x)`."""
        direct = [c for c in loop.calls if innermost_loop_is(loop, c)]
        backwards = [c for c in direct if is_tensor_backward(c)]
        if not backwards or not any(is_optimizer_step(c) for c in direct):
            return
        for call in direct:
            if not is_model_call(call) or call.no_grad or not call.branch or not _known(call):
                continue
            if any(
                not F.exclusive(b.branch, call.branch) and b.branch == call.branch
                for b in backwards
            ):
                continue  # trains in the same branch
            inputs = [ctx.dotted(arg) or "" for arg in call.node.args]
            if any(_TEST_DATA.search(name.rsplit(".", 1)[-1]) for name in inputs if name):
                ctx.report(self, call.node, what="this periodic evaluation")


_GRAPH = {F.OUTPUT, F.LOSS, F.TENSOR}
#: Calls that take gradients without ``backward``.
_GRADIENTS = re.compile(
    r"^torch\.(autograd\.(grad|functional\.\w+)|func\.\w*(grad|jac|vjp|jvp)\w*)$"
)


def _asks_for_gradients(call: F.CallEvent) -> bool:
    """``torch.autograd.grad(...)``, ``torch.func.grad``, ``x.requires_grad_()``."""
    if call.method == "requires_grad_":
        return True
    return call.qualname is not None and _GRADIENTS.match(call.qualname) is not None


def _always_called_without_grad(target: str | None, ctx: Context, depth: int = 0) -> bool:
    """Whether every project call of ``target`` runs under ``no_grad``: written
    there, or made by a function that is itself always called so."""
    sites = ctx.project.callers(target)
    if not sites or depth > 3:
        return False
    return all(
        site.fact.no_grad or _always_called_without_grad(site.caller, ctx, depth + 1)
        for site in sites
    )


def _evaluation(function: F.FunctionFacts, effects: Effects) -> tuple[ast.AST, str] | None:
    """(where, what) when the function evaluates a known model with autograd on:
    its name says it evaluates and it runs one, or it puts a model in
    evaluation mode and then runs one, itself or through the project
    functions it calls (``model.eval()`` then ``beam_search(src, model)``)."""
    name = f"`{function.name}()`"
    if is_evaluation_function(function):
        models = [c for c in model_calls(function) if not c.no_grad and _known(c)]
        if models:
            return _where(function, models[0]), name
    evals = [c for c in function.calls if is_eval(c) and c.receiver_kind in (F.MODULE, None)]
    if not evals:
        return None
    after = [c for c in function.calls if c.line >= evals[0].line and c is not evals[0]]
    for call in after:
        if call.method == "train":
            return None  # back to training: the evaluation was a pass inside it
        if not call.no_grad and _known(call) and is_model_call(call):
            return _where(function, call), name
        if call.target is not None and effects.call_does(call, E.MODEL_CALL_WITH_GRAD):
            callee = call.node.func
            label = callee.attr if isinstance(callee, ast.Attribute) else ast.unparse(callee)
            return call.node, f"{name} puts the model in evaluation mode, then `{label}()`"
    return None


def _where(function: F.FunctionFacts, first: F.CallEvent) -> ast.AST:
    """Where the graph is built: the loop over data that runs the model (where
    `with torch.no_grad():` belongs), else the first model call."""
    for loop in function.loops:
        node = loop.node
        outermost_for = loop.outer is None and isinstance(node, (ast.For, ast.AsyncFor))
        if outermost_for and any(is_model_call(c) and not c.no_grad for c in loop.calls):
            return loop_header(node)
    return first.node


_TEST_DATA = re.compile(r"(^|_)(test|val|valid|eval|dev)(_|$)|^(x|X)_?(test|val)")


def _known(call: F.CallEvent) -> bool:
    """The model is identified (not just a variable called `model`)."""
    value = call.callee_value or call.receiver_value
    return (
        value is not None
        and "guessed" not in value.flags
        and value.kind
        in (
            F.MODULE,
            F.LOADED,
        )
    )
