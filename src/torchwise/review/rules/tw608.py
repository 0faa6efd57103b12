"""TW608 determinism-undone (checkpoints).

The class docstring is its user documentation (`torchwise rules TW608`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.index.records import TOP_LEVEL
from torchwise.review.registry import Rule, rule


@rule
class DeterminismUndone(Rule):
    """## What it does
    Flags `torch.backends.cudnn.benchmark = True` in code that asks for
    deterministic kernels (`cudnn.deterministic = True` or
    `torch.use_deterministic_algorithms(True)`, in the same function or in a
    project function it calls), on a path where both hold (not the `else` of
    the same choice) and without a later `benchmark = False`.

    Only in files that train (or define functions that do): an evaluation
    script's numbers do not depend on the kernels' run-to-run choices enough
    to matter.

    ## Why is this bad?
    With benchmarking on, cuDNN times several algorithms at the first call of
    each shape and keeps the fastest, which differs between runs and
    machines; even among deterministic algorithms, a different choice gives
    different numerics. The determinism the script asked for is gone, and
    runs that should repeat do not.

    ## Example
    ```python
    import torch

    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    ```
    """

    code = "TW608"
    name = "determinism-undone"
    family = "checkpoints"
    severity = Severity.WARNING
    impact = "reproducibility"
    message = "cuDNN benchmarking picks algorithms by timing, undoing the determinism {where}"
    needs_text = ("benchmark",)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if not _trains(module, ctx):
            return  # inference or evaluation only: its numbers are not a training run's
        settings = module.settings
        requests = [s for s in settings if s.name != "benchmark" and s.value is not False]
        benchmarks = [s for s in settings if s.name == "benchmark" and s.value is True]
        for benchmark in benchmarks:
            if _reset_later(benchmark, settings):
                continue
            request = next(
                (
                    r
                    for r in requests
                    if r.function is benchmark.function
                    and not F.exclusive(r.branch, benchmark.branch)
                ),
                None,
            )
            if request is not None:
                line = getattr(request.node, "lineno", 0)
                ctx.report(self, benchmark.node, where=f"asked for on line {line}")
                continue
            caller = _deterministic_call(module, benchmark, ctx)
            if caller is not None:
                ctx.report(self, benchmark.node, where=f"that `{caller}` asks for")
                continue
            asked = _asked_by_caller(benchmark, ctx)
            if asked is not None:
                ctx.report(
                    self, benchmark.node, where=f"asked for before this function runs ({asked})"
                )


def _trains(module: F.ModuleFacts, ctx: Context) -> bool:
    """Whether running this file trains, or a function it defines does."""
    if E.LEARNS in ctx.project.effects(ctx.project.own(TOP_LEVEL)):
        return True
    return any(
        E.LEARNS in ctx.project.effects(function.target)
        for function in module.functions
        if function.target is not None
    )


def _reset_later(benchmark: F.SettingFacts, settings: list[F.SettingFacts]) -> bool:
    line = getattr(benchmark.node, "lineno", 0)
    return any(
        s.name == "benchmark"
        and s.value is False
        and s.function is benchmark.function
        and getattr(s.node, "lineno", 0) > line
        for s in settings
    )


def _deterministic_call(
    module: F.ModuleFacts, benchmark: F.SettingFacts, ctx: Context
) -> str | None:
    """A call in the same function that asks for determinism through a project
    function (``set_determinism(seed)``), on a path that meets the setting."""
    calls = benchmark.function.calls if benchmark.function is not None else module.calls
    for call in calls:
        if call.target is None or F.exclusive(call.branch, benchmark.branch):
            continue
        if E.DETERMINISTIC in ctx.project.effects(call.target):
            return ctx.text(call.node.func)
    return None


def _asked_by_caller(benchmark: F.SettingFacts, ctx: Context) -> str | None:
    """A project function that asks for determinism and then calls the one that
    sets ``benchmark``: ``main()`` sets ``deterministic`` under ``--seed``, then
    calls ``main_worker()``."""
    function = benchmark.function
    if function is None or function.target is None:
        return None
    for site in ctx.project.callers(function.target):
        caller = ctx.project.function(site.caller)
        if caller is None:
            continue
        for effect, line, _col, branch in caller.events:
            if effect != E.DETERMINISTIC or line >= site.fact.line:
                continue
            if not F.exclusive(tuple(branch), tuple(site.fact.branch)):
                where = site.path if site.path != ctx.path else "line"
                return f"{where} {line}" if where == "line" else f"{where}:{line}"
    return None
