"""TW157 scheduler-horizon-in-other-units (training).

The class docstring is its user documentation (`torchwise rules TW157`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule

#: scheduler -> (the argument that sets its length, its position)
_HORIZONS = {
    "torch.optim.lr_scheduler.CosineAnnealingLR": ("T_max", 1),
    "torch.optim.lr_scheduler.OneCycleLR": ("total_steps", 2),
    "torch.optim.lr_scheduler.LinearLR": ("total_iters", 3),
    "torch.optim.lr_scheduler.PolynomialLR": ("total_iters", 1),
    "torch.optim.lr_scheduler.ConstantLR": ("total_iters", 2),
    "transformers.get_linear_schedule_with_warmup": ("num_training_steps", 2),
    "transformers.get_cosine_schedule_with_warmup": ("num_training_steps", 2),
    "transformers.optimization.get_linear_schedule_with_warmup": ("num_training_steps", 2),
    "transformers.optimization.get_cosine_schedule_with_warmup": ("num_training_steps", 2),
}
#: A length in optimizer steps: the batches of an epoch appear in it.
_ITERATIONS = re.compile(
    r"len\(\s*\w*(loader|iter|batch)\w*\s*\)|steps_per_epoch|iters?_per_epoch|num_training_steps|"
    r"total_steps|max_steps|max_iter|num_iters|total_iters|n_iters|iterations|num_batches|"
    r"batches_per_epoch",
    re.IGNORECASE,
)
#: A length in epochs, and nothing that counts batches.
_EPOCHS = re.compile(
    r"^[\w.\[\]'\"]*epochs?\w*$|^[\w.]*(EPOCHS|num_epoch\w*|n_epoch\w*|max_epoch\w*)$",
    re.IGNORECASE,
)


@rule
class SchedulerHorizonInOtherUnits(Rule):
    """## What it does
    Flags a learning-rate scheduler whose length is counted in one unit and
    whose `step()` is called in another: a length in batches
    (`T_max=epochs * len(loader)`, `total_steps=...`,
    `num_training_steps=...`) with `scheduler.step()` once per epoch, or a
    length in epochs (`T_max=args.epochs`) with `scheduler.step()` after every
    batch; both in the same function.

    ## Why is this bad?
    A schedule stepped per epoch over a length in batches covers a fraction
    of its course: a cosine decay ends the run near its starting rate. One
    stepped per batch over a length in epochs runs its whole course in the
    first few hundred batches, then stays at its minimum (or, for
    `CosineAnnealingLR`, climbs back up every `T_max` batches);
    `OneCycleLR` raises once stepped past `total_steps`.

    ## Example
    ```python
    import torch

    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        scheduler.step()
    ```

    ## Use instead
    ```python
    import torch

    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            scheduler.step()
    ```
    """

    code = "TW157"
    name = "scheduler-horizon-in-other-units"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = "{what}"
    needs_text = ("lr_scheduler", "schedule", "onecycle", "cosineannealing")

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._judge(function.node, function.calls, function.loops, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        inside = {call for function in module.functions for call in function.calls}
        top_loops = [loop for loop in module.loops if loop.function is None]
        self._judge(module.node, [c for c in module.calls if c not in inside], top_loops, ctx)

    def _judge(
        self, scope: ast.AST, calls: list[F.CallEvent], loops: list[F.LoopFacts], ctx: Context
    ) -> None:
        for name, horizon, units in _schedulers(scope, ctx):
            for call in calls:
                if call.method != "step" or call.receiver != name:
                    continue
                per_batch = any(call in loop.calls and _over_data(loop) for loop in loops)
                in_loop = any(call in loop.calls for loop in loops)
                if not in_loop:
                    continue
                if units == "batches" and not per_batch:
                    what = (
                        f"`{name}` is sized in batches (`{horizon}`) but stepped once per epoch: "
                        "it covers a fraction of its schedule (the rate barely moves); step it "
                        "after each batch, or size it in epochs"
                    )
                elif units == "epochs" and per_batch:
                    what = (
                        f"`{name}` is sized in epochs (`{horizon}`) but stepped after every batch: "
                        "it runs its whole schedule in the first epochs; step it once per epoch, "
                        "or size it in batches"
                    )
                else:
                    continue
                ctx.report(self, call.node, what=what)
                return


def _schedulers(scope: ast.AST, ctx: Context) -> list[tuple[str, str, str]]:
    """(name, horizon text, "batches" or "epochs") for each scheduler the scope builds."""
    found = []
    for node in subtree(scope):
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.value, ast.Call)
        ):
            continue
        call = node.value
        spec = _HORIZONS.get(ctx.call_name(call) or "")
        name = ctx.dotted(node.targets[0])
        if spec is None or name is None:
            continue
        argument = keyword(call, spec[0])
        value = (
            argument.value
            if argument is not None
            else (call.args[spec[1]] if len(call.args) > spec[1] else None)
        )
        if value is None:
            continue
        text = ctx.text(value)
        if _ITERATIONS.search(text):
            found.append((name, text, "batches"))
        elif _EPOCHS.match(text.replace(" ", "")):
            found.append((name, text, "epochs"))
    return found


def _over_data(loop: F.LoopFacts) -> bool:
    """A loop over batches: a DataLoader, or a name that says it holds batches."""
    if loop.iterates is not None and loop.iterates.kind == F.LOADER:
        return True
    iterated = (loop.iterated or "").lower()
    if any(word in iterated for word in ("loader", "batch", "dataset", "data_iter")):
        return True
    node = loop.node
    if isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
        text = ast.unparse(node.iter).lower()
        return any(word in text for word in ("loader", "batch", "tqdm"))
    return False
