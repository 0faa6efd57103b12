"""TW202 sync-in-training-loop (performance).

The class docstring is its user documentation (`torchwise rules TW202`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._performance import SYNCS, guarded


@rule
class SyncInTrainingLoop(Rule):
    """## What it does
    Flags `.item()`, `.cpu()`, `.numpy()`, `.tolist()` and `print(loss)` run on
    every iteration of a training loop (a loop that calls `backward()`).
    Calls under an `if` in the loop (logging every N steps) are not flagged.

    ## Why is this bad?
    Each one copies a value to the host, so the CPU waits for every queued
    GPU kernel to finish: the pipeline drains on every step, and the next
    step's kernels are launched late. Accumulate on the device and read it
    every N steps.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.item()
    ```

    ## Use instead
    ```python
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.detach()
        if step % 100 == 0:
            print(running.item() / (step + 1))
    ```
    """

    code = "TW202"
    name = "sync-in-training-loop"
    family = "performance"
    severity = Severity.INFO
    impact = "performance"
    default_enabled = False
    message = "{what} every training step waits for the GPU (a host sync)"

    def __init__(self) -> None:
        self.unguarded: set[int] = set()  # ids of sync calls not under an `if` in their loop
        self.reported: set[int] = set()

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not ctx.loops or guarded(ctx):
            return
        func = node.func
        sync = isinstance(func, ast.Attribute) and func.attr in SYNCS and not node.args
        printed = isinstance(func, ast.Name) and func.id == "print"
        if sync or (printed and any(ctx.kind_of(a) in {F.LOSS, F.OUTPUT} for a in node.args)):
            self.unguarded.add(id(node))

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        if not any(call.method == "backward" for call in loop.calls):
            return
        for call in loop.calls:
            node = call.node
            if id(node) in self.unguarded and id(node) not in self.reported:
                self.reported.add(id(node))
                what = "`print(...)`" if call.method is None else f"`.{call.method}()`"
                ctx.report(self, node, what=what)
