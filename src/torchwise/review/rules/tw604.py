"""TW604 unseeded-training-script (checkpoints).

The class docstring is its user documentation (`torchwise rules TW604`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.index.records import TOP_LEVEL
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._checkpoints import loop_header, trains
from torchwise.review.rules._loops import top_level_calls


@rule
class UnseededTrainingScript(Rule):
    """## What it does
    Flags a training script that never seeds its random number generators: a
    file that runs training when executed (an `if __name__ == "__main__":`
    entry point, or top-level code) and reaches `backward()` and an optimizer
    step, directly or through the functions and methods it calls (in any file
    of the project), without ever calling `torch.manual_seed`, `random.seed`,
    `np.random.seed`, `seed_everything`, `set_seed` or anything else whose name
    mentions `seed` (seeding only when a `--seed` flag is given counts); and one that
    seeds only torch but draws from Python's `random` or NumPy's generator in the same file
    (a hint when the draw is in a project function it runs, whose branch may never be
    taken); and one that builds a model (its initial weights are random) but seeds only
    Python's or NumPy's generator (a fixed data split, `env.seed`), never torch's.
    Reported once per file, at its first training loop (or its entry point).
    A warning when the file asks for repeatable runs (a `seed` option or
    setting that is never used to seed, `deterministic` flags, the word
    "reproducible"); otherwise a hint (`info`): a script that makes no claim
    of reproducibility is not wrong to be unseeded.

    ## Why is this bad?
    Weight initialisation, data shuffling, augmentation and dropout then
    differ on every run: results cannot be reproduced, two runs cannot be
    compared fairly, and a bug that appears once may never appear again.

    ## Example
    ```python
    import torch

    def main():
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    if __name__ == "__main__":
        main()
    ```

    ## Use instead
    ```python
    import torch

    def main():
        torch.manual_seed(0)
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    if __name__ == "__main__":
        main()
    ```
    """

    code = "TW604"
    name = "unseeded-training-script"
    family = "checkpoints"
    severity = Severity.WARNING
    in_test_modules = False
    message = "this training script never seeds its random generators: runs are not reproducible"

    def __init__(self) -> None:
        self.entry_point: ast.If | None = None

    def visit_If(self, node: ast.If, ctx: Context) -> None:
        if ctx.function is None and not ctx.classes and _is_main_guard(node.test):
            self.entry_point = self.entry_point or node

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        effects = _run_effects(ctx)
        if not {E.LEARNS, E.STEP} <= effects:
            return  # the file does not train when run
        level = None if asks_for_reproducibility(ctx.source) else Severity.INFO
        if E.SEED in effects and E.SEEDS_TORCH not in effects and E.BUILDS_MODEL in effects:
            if not any(E.seeds_torch(call) for call in module.calls):
                self._report(module, ctx, level, self.only_other_message)
            return
        if E.SEED in effects:
            self._check_partial(module, ctx)
            return  # seeded somewhere on the way
        if any(E.is_seed(call) for call in module.calls):
            return  # seeds in a function this file defines (a helper it may call)
        self._report(module, ctx, level, None)

    only_other_message = (
        "this training script seeds only Python's or NumPy's generator (or an "
        "environment's), never torch's: weight initialisation, dropout and shuffling "
        "differ on every run"
    )

    def _report(
        self, module: F.ModuleFacts, ctx: Context, level: Severity | None, message: str | None
    ) -> None:
        """Once per file: at its first training loop, else its entry point, else
        the top-level call that trains."""
        loops = [*module.loops, *(loop for f in module.functions for loop in f.loops)]
        training = [loop for loop in loops if trains(loop)]
        if training:
            first = min(training, key=lambda loop: getattr(loop.node, "lineno", 0))
            ctx.report(self, loop_header(first.node), message=message, severity=level)
        elif self.entry_point is not None:
            ctx.report(self, _line_of(self.entry_point), message=message, severity=level)
        else:
            top = [c for c in top_level_calls(module) if c.target is not None]
            trainer = next((c for c in top if E.LEARNS in ctx.project.effects(c.target)), None)
            if trainer is not None:
                ctx.report(self, trainer.node, message=message, severity=level)

    def _check_partial(self, module: F.ModuleFacts, ctx: Context) -> None:
        """Seeds torch only, but draws from Python's or NumPy's generator here,
        or in a project function it runs."""
        seeds = [c.qualname or "" for c in module.calls if E.is_seed(c)]
        effects = _run_effects(ctx)
        for draws, seeded, drawn in (
            (E.DRAWS_NUMPY, E.SEEDS_NUMPY, "numpy.random"),
            (E.DRAWS_RANDOM, E.SEEDS_RANDOM, "random"),
        ):
            here = any(
                (E.draws_numpy if draws == E.DRAWS_NUMPY else E.draws_random)(call)
                for call in module.calls
            )
            if draws in effects and seeded not in effects and not here and seeds:
                message = (
                    "this training script seeds torch, but a function it runs draws from "
                    "`{generator}`, which is never seeded: runs are not reproducible if "
                    "that draw is reached"
                )
                where = _entry_node(self.entry_point, module)
                # A hint: the draw may sit on a branch the run never takes.
                ctx.report(self, where, message=message, generator=drawn, severity=Severity.INFO)
                return
        if not seeds or not all(_TORCH_SEED.match(name) for name in seeds):
            return  # seeded elsewhere (can't tell what), or beyond torch
        for call in module.calls:
            name = call.qualname or ""
            generator = _UNSEEDED_DRAW.match(name)
            if generator is not None:
                message = (
                    "this training script seeds torch but draws from `{generator}`, "
                    "which is never seeded: runs are not reproducible"
                )
                # Under an `if`, the draw may be on a path the run never takes
                # (`if random_color:` in a plotting helper): a hint.
                level = Severity.INFO if call.branch else None
                ctx.report(
                    self, call.node, message=message, generator=generator.group(1), severity=level
                )
                return


def _run_effects(ctx: Context) -> frozenset[str]:
    """What running the file does: its top-level code, the project functions
    it calls, and the seeds its project imports set as they are imported."""
    return ctx.project.effects(ctx.project.own(TOP_LEVEL)) | ctx.project.import_seeds()


#: What shows that a script means its runs to repeat: a seed option or
#: setting, determinism flags, the word itself.
_REPRODUCIBILITY = re.compile(r"seed|deterministic|reproducib", re.IGNORECASE)


def asks_for_reproducibility(source: str) -> bool:
    """Whether the file asks for repeatable runs (a ``--seed`` option never used
    to seed, ``cudnn.deterministic``, ``use_deterministic_algorithms``): then an
    unseeded run is a bug; otherwise a hint."""
    return _REPRODUCIBILITY.search(source) is not None


_TORCH_SEED = re.compile(r"torch\.(cuda\.)?(manual_seed(_all)?|random\.manual_seed)$")
_UNSEEDED_DRAW = re.compile(r"(random|numpy\.random)\.(?!seed$|get_state$|set_state$)\w+$")


def _entry_node(entry: ast.If | None, module: F.ModuleFacts) -> ast.AST:
    """Where a finding about the whole script goes: its entry point, else its first seed."""
    if entry is not None:
        return _line_of(entry)
    seed = next((call.node for call in module.calls if E.is_seed(call)), None)
    return seed if seed is not None else module.node


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )


def _line_of(node: ast.If) -> ast.AST:
    """The ``if __name__ == "__main__":`` line itself."""
    test = node.test
    return ast.Pass(
        lineno=node.lineno,
        col_offset=node.col_offset,
        end_lineno=test.end_lineno,
        end_col_offset=test.end_col_offset,
    )
