"""TW607 seed-not-reaching-spawned-processes (checkpoints).

The class docstring is its user documentation (`torchwise rules TW607`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

_SPAWNS = {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"}


@rule
class SeedNotReachingSpawnedProcesses(Rule):
    """## What it does
    Flags `torch.multiprocessing.spawn(fn, ...)` (and `start_processes`)
    called after the parent process seeds its generators or sets
    `cudnn.deterministic`, in a function or under `if __name__ ==
    "__main__":`, when `fn` (and the project functions it calls) never seeds
    nor restores a generator's state (`torch.set_rng_state(saved)`).

    ## Why is this bad?
    `spawn` starts fresh Python interpreters: each re-imports the script as a
    module, so code under the `__main__` guard and in the parent's functions
    never runs there. The seeds and the cuDNN flags the parent set do not
    reach the workers, which start from random state: the runs the script
    seeded are not reproducible after all.

    ## Example
    ```python
    import torch
    import torch.multiprocessing as mp

    def worker(rank):
        torch.randn(3)

    if __name__ == "__main__":
        torch.manual_seed(0)
        mp.spawn(worker, nprocs=2)
    ```

    ## Use instead
    ```python
    import torch
    import torch.multiprocessing as mp

    def worker(rank, seed):
        torch.manual_seed(seed + rank)
        torch.randn(3)

    if __name__ == "__main__":
        mp.spawn(worker, args=(0,), nprocs=2)
    ```
    """

    code = "TW607"
    name = "seed-not-reaching-spawned-processes"
    family = "checkpoints"
    severity = Severity.WARNING
    impact = "reproducibility"
    message = (
        "{what} on line {line} does not reach the processes `spawn` starts: "
        "`{worker}` never {again}, so each worker {state}"
    )
    call_names = frozenset(_SPAWNS)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in _SPAWNS or not node.args:
            return
        worker = node.args[0]
        target = ctx.project.call_target(ctx, ast.Call(func=worker, args=[], keywords=[]))
        if target is None:
            return
        effects = ctx.project.effects(target)
        found = self._parent_setting(node, ctx)
        if found is not None:
            what, line, seed, torch_seed = found
            # A parent that seeds torch needs workers that seed torch's CPU
            # generator: `torch.cuda.manual_seed` alone leaves the weights'
            # initialisation (made on the CPU) random.
            needed = (E.SEEDS_TORCH if torch_seed else E.SEED) if seed else E.DETERMINISTIC
            if needed in effects:
                return
            fact = ctx.project.function(target)
            ctx.report(
                self,
                node,
                what=what,
                line=str(line),
                worker=ctx.text(worker),
                again="seeds" if seed else "sets it",
                state="starts from random state" if seed else "may pick nondeterministic kernels",
                worker_line=str(fact.line if fact is not None else node.lineno),
            )

    def _parent_setting(self, node: ast.Call, ctx: Context) -> tuple[str, int, bool, bool] | None:
        """The first seed or determinism flag the parent set before ``node``,
        where a re-import does not run it again."""
        line = node.lineno
        function = ctx.function
        calls = function.calls if function is not None else ctx.module.calls
        for call in calls:
            if call.line >= line or F.exclusive(call.branch, ctx.branch):
                continue
            if function is None and not _guarded(call.branch):
                continue  # top-level code runs again when the worker imports the script
            if E.is_seed(call) or (
                call.target is not None and E.SEED in ctx.project.effects(call.target)
            ):
                return f"`{ctx.text(call.node.func)}`", call.line, True, E.seeds_torch(call)
        for setting in ctx.module.settings:
            at = getattr(setting.node, "lineno", 0)
            if setting.function is not function or at >= line or setting.value is False:
                continue
            if function is None and not _guarded(setting.branch):
                continue
            if setting.name != "benchmark":
                shown = ctx.text(setting.node).split("(")[0]
                return f"`{shown}`", at, False, False
        return None


def _guarded(branch: F.Branch) -> bool:
    """Under ``if __name__ == "__main__":``."""
    return any("__name__" in test for test, _ in branch)
