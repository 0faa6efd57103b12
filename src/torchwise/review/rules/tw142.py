"""TW142 optimizer-created-per-epoch (training).

The class docstring is its user documentation (`torchwise rules TW142`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import Effects, enclosing_loops, innermost_loop


@rule
class OptimizerCreatedPerEpoch(Rule):
    """## What it does
    Flags an optimizer built inside an epoch loop (or in a function called from
    one) and stepped there, when the loop does not build a new model too.

    ## Why is this bad?
    Every new optimizer starts from scratch: SGD's momentum buffers, Adam's
    moment estimates and step counts are thrown away at each epoch, so Adam
    restarts its bias correction and effectively re-warms up every epoch, and
    any learning-rate scheduler attached to the old optimizer stops affecting
    the new one. Training is slower and noisier than configured.

    ## Example
    ```python
    import torch

    def train_epoch(model, loader):
        optimizer = torch.optim.Adam(model.parameters())
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()

    for epoch in range(10):
        train_epoch(model, loader)
    ```

    ## Use instead
    ```python
    import torch

    def train_epoch(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()

    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(10):
        train_epoch(model, loader, optimizer)
    ```
    """

    code = "TW142"
    name = "optimizer-created-per-epoch"
    family = "training"
    severity = Severity.INFO
    in_test_modules = False
    message = (
        "a new optimizer is built {where}: its state (momentum, Adam moments) restarts each time"
    )

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        effects = Effects(module, ctx)
        for function in module.functions:
            built = [c for c in function.calls if E.builds_optimizer(c)]
            if not built or not effects.region_does(function.calls, "step"):
                continue
            for creation in built:
                loop = innermost_loop(function.loops, creation)
                if loop is not None:
                    self._in_loop(loop, creation, effects, ctx)
                    continue
                if any(c.builds_model for c in function.calls):
                    continue  # builds its own model too: a fresh run, not a restart
                self._per_call(function, creation, effects, ctx)
        inside = {call for function in module.functions for call in function.calls}
        for creation in (c for c in module.calls if c not in inside and E.builds_optimizer(c)):
            loop = innermost_loop(module.loops, creation)
            if loop is not None:
                self._in_loop(loop, creation, effects, ctx)

    def _in_loop(
        self, loop: F.LoopFacts, creation: F.CallEvent, effects: Effects, ctx: Context
    ) -> None:
        for outer in enclosing_loops(loop):
            if any(c.builds_model for c in outer.calls):
                return  # a new model each time (k-fold, sweeps): a new optimizer is right
        if _trains_in(loop, effects):
            ctx.report(self, creation.node, where="on every pass of this loop")

    def _per_call(
        self, function: F.FunctionFacts, creation: F.CallEvent, effects: Effects, ctx: Context
    ) -> None:
        sites = ctx.project.callers(function.target)
        looped = [site for site in sites if site.fact.in_loop]
        if looped and len(looped) == len(sites):
            where = f"on every call of `{function.name}()`, which a loop calls"
            ctx.report(self, creation.node, where=where)


def _trains_in(loop: F.LoopFacts, effects: Effects) -> bool:
    """Each pass of the loop trains with the optimizer it builds."""
    return effects.region_does(loop.calls, "step") and effects.region_does(loop.calls, "backward")
