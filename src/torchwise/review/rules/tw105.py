"""TW105 training-after-eval (training).

The class docstring is its user documentation (`torchwise rules TW105`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import Effects, is_eval, position, regions


@rule
class TrainingAfterEval(Rule):
    """## What it does
    Flags a loop that trains (calls `backward()`, directly or through a
    function of the same file) after an evaluation in the same loop put the
    model in `.eval()` mode, with no `.train()` call anywhere in the loop.

    Not flagged: an `.eval()` written in the training loop itself before it
    trains, or in the function that trains (a deliberate choice, such as
    fine-tuning with frozen batch-norm statistics or linear evaluation on
    frozen features), and models whose class (as the project shows it) has no
    dropout and no batch norm, which behave the same in both modes.

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
                evals = [c for c in calls if effects.call_does(c, "eval")]
                if not evals or effects.region_does(calls, "train"):
                    continue
                trainers = [c for c in calls if effects.call_does(c, "backward")]
                if not trainers:
                    continue
                if any(_trains_in_eval_mode(t, ctx) for t in trainers):
                    continue  # `train()` sets its own mode (linear evaluation on frozen features)
                first = min(position(t.node) for t in trainers)
                evaluations = [e for e in evals if not _sets_training_mode(e, first)]
                if evaluations and not all(_mode_independent(e, ctx) for e in evaluations):
                    ctx.report(self, trainers[0].node)


def _trains_in_eval_mode(call: F.CallEvent, ctx: Context) -> bool:
    """The called function itself puts the model in eval mode before its first
    backward, and never back in train mode: it trains in eval mode on purpose."""
    fact = ctx.project.function(call.target)
    if fact is None:
        return False
    evals = [line for effect, line, _, _ in fact.events if effect == E.EVAL]
    trains = [line for effect, line, _, _ in fact.events if effect == E.TRAIN]
    backwards = [line for effect, line, _, _ in fact.events if effect == E.BACKWARD]
    return bool(evals and backwards and not trains) and min(evals) < min(backwards)


def _sets_training_mode(call: F.CallEvent, first_training: tuple[int, int]) -> bool:
    """``model.eval()`` written in the training loop itself, before it trains: a
    deliberate choice (frozen batch statistics, no dropout), not an evaluation."""
    return is_eval(call) and position(call.node) < first_training


def _mode_independent(call: F.CallEvent, ctx: Context) -> bool:
    """Whether every model the call puts in eval mode behaves the same in both
    modes: its class (or torch layer) has no dropout and no batch norm, as far
    as the project shows."""
    if is_eval(call):
        models = [call.receiver_value]
    else:
        models = [ctx.value_of(arg) for arg in call.node.args]
        models = [m for m in models if m is not None and m.kind == F.MODULE]
        if not models:
            return False  # evaluates something we cannot see: assume it matters
    return all(_without_mode_layers(model, ctx) for model in models)


def _without_mode_layers(model: F.Value | None, ctx: Context) -> bool:
    if model is None or model.kind != F.MODULE or "guessed" in model.flags:
        return False
    origin = model.origin or ""
    klass = ctx.project.klass(origin) if origin else None
    if klass is not None:
        return not (klass.dropout or klass.batchnorm or klass.unknown)
    if origin.startswith("torch.nn."):
        return not ({"dropout", "batchnorm", "opaque"} & model.flags)
    return False
