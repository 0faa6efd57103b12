"""TW144 scheduler-sized-in-micro-batches (training).

The class docstring is its user documentation (`torchwise rules TW144`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

_SIZES = ("num_warmup_steps", "num_training_steps", "warmup_steps", "total_steps")
_ACCUMULATION = re.compile(r"\*\s*[\w.]*grad(ient)?_accum\w*|[\w.]*grad(ient)?_accum\w*\s*\*")


@rule
class SchedulerSizedInMicroBatches(Rule):
    """## What it does
    Flags a learning-rate scheduler whose warm-up or total length is multiplied
    by the number of gradient-accumulation steps, when the scheduler is then
    handed to Hugging Face Accelerate (`accelerator.prepare(..., scheduler)`).

    ## Why is this bad?
    A scheduler prepared by Accelerate steps only when the optimizer does:
    during accumulation `lr_scheduler.step()` is skipped. Its lengths must be
    counted in optimizer steps. Multiplied by the accumulation steps, warm-up
    lasts that many times too long and the decay never reaches its end, so the
    run trains with a different learning-rate curve than configured.

    ## Example
    ```python
    from transformers import get_scheduler

    scheduler = get_scheduler(
        "linear",
        optimizer=optimizer,
        num_warmup_steps=warmup * gradient_accumulation_steps,
        num_training_steps=max_steps * gradient_accumulation_steps,
    )
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    ```

    ## Use instead
    ```python
    from transformers import get_scheduler

    scheduler = get_scheduler(
        "linear",
        optimizer=optimizer,
        num_warmup_steps=warmup,
        num_training_steps=max_steps,
    )
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    ```
    """

    code = "TW144"
    name = "scheduler-sized-in-micro-batches"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "`{argument}` counts micro-batches, but the scheduler Accelerate prepares steps "
        "once per optimizer step: drop the `* gradient_accumulation_steps`"
    )

    def __init__(self) -> None:
        self.candidates: dict[str, list[tuple[ast.keyword, str]]] = {}  # scheduler name -> sizes
        self.prepared: set[str] = set()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        value = node.value
        if not (isinstance(value, ast.Call) and ctx.kind_of(value) == F.SCHEDULER):
            if isinstance(value, ast.Call) and _is_prepare(value):
                self.prepared |= {n for arg in value.args if (n := ctx.dotted(arg))}
            return
        name = ctx.dotted(node.targets[0]) if len(node.targets) == 1 else None
        if name is None:
            return
        sizes = [
            (item, item.arg)
            for item in value.keywords
            if item.arg in _SIZES and _ACCUMULATION.search(ctx.text(item.value))
        ]
        if sizes:
            self.candidates[name] = sizes

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        for name, sizes in self.candidates.items():
            if name in self.prepared:
                for item, argument in sizes:
                    ctx.report(self, item, argument=argument)


def _is_prepare(call: ast.Call) -> bool:
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "prepare"
