"""TW119 gradient-accumulation-off-by-one (training).

The class docstring is its user documentation (`torchwise rules TW119`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import constant
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import is_optimizer_step


@rule
class GradientAccumulationOffByOne(Rule):
    """## What it does
    Flags `optimizer.step()` guarded by `if step % accumulation == 0:` where
    `step` counts from 0 (`for step, batch in enumerate(loader)`) and the loss
    is backpropagated on every batch.

    ## Why is this bad?
    `0 % n == 0`: the optimizer steps after the very first micro-batch, then
    every `n` batches. The first update uses one batch instead of `n`, every
    later window is shifted, and the gradients of the epoch's last batches leak
    into the next epoch's first step. With the loss divided by `n`, the first
    step is also `n` times too small. The correct test is
    `(step + 1) % n == 0` (or `enumerate(loader, start=1)`).

    ## Example
    ```python
    for step, batch in enumerate(loader):
        loss = model(**batch).loss / accumulation
        loss.backward()
        if step % accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    for step, batch in enumerate(loader):
        loss = model(**batch).loss / accumulation
        loss.backward()
        if (step + 1) % accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```
    """

    code = "TW119"
    name = "gradient-accumulation-off-by-one"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "`{test}` is true at step 0: the first update uses one batch and every "
        "accumulation window is shifted; use `({index} + 1) % ... == 0`"
    )

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        index = _enumerate_index(loop.node)
        if index is None:
            return
        pattern = re.compile(rf"(^|\bor\s+|\()\s*{re.escape(index)}\s*%\s*[^=<>]+==\s*0\b")
        reported: set[str] = set()
        for step in loop.calls:
            if not is_optimizer_step(step):
                continue
            skips_zero = re.compile(
                rf"\b{re.escape(index)}\s*(!=\s*0|>\s*0|>=\s*1)\b|\band\s+{re.escape(index)}\b"
            )
            guard = next(
                (
                    test
                    for test, holds in step.branch
                    if holds and pattern.search(test) and not skips_zero.search(test)
                ),
                None,
            )
            if guard is None or guard in reported:
                continue
            every_batch = [
                call for call in loop.calls if E.learns(call) and (guard, True) not in call.branch
            ]
            guarded = [c for c in loop.calls if E.learns(c) and (guard, True) in c.branch]
            if every_batch and not guarded:  # a backward under the guard: a schedule (n_critic)
                reported.add(guard)
                ctx.report(self, step.node, test=guard, index=index)


def _enumerate_index(node: ast.AST) -> str | None:
    """``step`` in ``for step, batch in enumerate(loader)`` (counting from 0)."""
    if not isinstance(node, (ast.For, ast.AsyncFor)):
        return None
    call = node.iter
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return None
    if call.func.id != "enumerate" or len(call.args) > 2:
        return None
    start = call.args[1] if len(call.args) == 2 else None
    for item in call.keywords:
        if item.arg == "start":
            start = item.value
    if start is not None and constant(start) != 0:
        return None
    target = node.target
    if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
        return target.elts[0].id
    return None
