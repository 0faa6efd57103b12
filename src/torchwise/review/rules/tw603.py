"""TW603 checkpoint-without-optimizer (checkpoints).

The class docstring is its user documentation (`torchwise rules TW603`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.index.records import SaveFact
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._checkpoints import PROGRESS_KEYS
from torchwise.review.rules._performance import trains


@rule
class CheckpointWithoutOptimizer(Rule):
    """## What it does
    Flags `torch.save({...})` of a resumable checkpoint (a dict holding a
    model's `state_dict()`, in a file that trains or next to an `epoch`/`step`
    entry) that has no optimizer state, in a file that does not save the
    optimizer's `state_dict()` on its own either. It is a hint (info) in a
    project that never resumes (no load reads an epoch, a step or an
    optimizer back): nothing restarts from it yet.

    ## Why is this bad?
    Resuming from it restarts the optimizer from scratch: Adam's moment
    estimates and SGD's momentum are lost, and the learning-rate warm-up
    effectively repeats, so the resumed run diverges from an uninterrupted one
    (often with a loss spike).

    ## Example
    ```python
    import torch

    torch.save({"epoch": epoch, "model": model.state_dict()}, "last.pt")
    ```

    ## Use instead
    ```python
    import torch

    torch.save(
        {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
        "last.pt",
    )
    ```
    """

    code = "TW603"
    name = "checkpoint-without-optimizer"
    family = "checkpoints"
    severity = Severity.WARNING
    in_test_modules = False
    impact = "results"
    message = "checkpoint saves the model but not the optimizer: resuming resets its state"

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        saves = [save for path, save in ctx.project.saves() if path == ctx.path]
        if any(save.whole == "optimizer_state" for path, save in ctx.project.saves()):
            return  # the project saves the optimizer's state on its own
        file_trains = trains(module.calls)
        candidates = [
            save
            for save in saves
            if _resumable(save) and not _has_optimizer(save) and (_progress(save) or file_trains)
        ]
        if not candidates:
            return
        resume = next(
            (
                load
                for load in module.loads.values()
                if load.keys & PROGRESS_KEYS and not any(_optimizer_key(k) for k in load.keys)
            ),
            None,
        )
        if resume is not None:
            # Resuming is where the missing state bites: report there, once.
            message = (
                "resuming restores the model and the epoch but not the optimizer (the checkpoint "
                f"saved at line {candidates[0].line} has no optimizer state): it restarts fresh"
            )
            ctx.report(self, resume.node, message=message)
            return
        resumes = [
            load
            for _, load in ctx.project.loads()
            if {key.lower() for key in load.keys} & PROGRESS_KEYS
            or any(_optimizer_key(key) for key in load.keys)
        ]
        if not resumes:
            # Nothing in the project resumes from a checkpoint (its loads read
            # weights only): the missing state only matters to whoever adds
            # resuming later, a hint rather than a bug.
            for save in candidates:
                ctx.report(
                    self,
                    _line(ctx, save.line),
                    message=(
                        "checkpoint saves the model but not the optimizer: nothing here resumes "
                        "from it yet, but a resume from it would restart the optimizer"
                    ),
                    severity=Severity.INFO,
                )
            return
        for save in candidates:
            ctx.report(self, _line(ctx, save.line))


def _resumable(save: SaveFact) -> bool:
    return save.whole is None and any(
        kind == "model_state" or (kind == "state" and not _optimizer_key(key))
        for key, kind in save.keys.items()
    )


def _has_optimizer(save: SaveFact) -> bool:
    """Whether the checkpoint may hold the optimizer: under a key that says so,
    or inside the state of an object that is neither a model nor an optimizer
    (``trainer.state_dict()`` usually carries its optimizer's)."""
    return any(
        _optimizer_key(key)
        or (kind in {"optimizer_state", "optimizer", "state"} and not _model_key(key))
        for key, kind in save.keys.items()
    )


def _model_key(key: str) -> bool:
    key = key.lower()
    return any(word in key for word in ("model", "net", "ema", "encoder", "decoder", "generator"))


def _progress(save: SaveFact) -> bool:
    return any(key.lower() in PROGRESS_KEYS for key in save.keys)


def _optimizer_key(key: str) -> bool:
    key = key.lower()
    return "optim" in key or key in {"opt", "opt_state"}


def _line(ctx: Context, line: int) -> ast.AST:
    text = ctx.lines[line - 1] if 0 < line <= len(ctx.lines) else ""
    start = len(text) - len(text.lstrip())
    return ast.Pass(
        lineno=line, col_offset=start, end_lineno=line, end_col_offset=len(text.rstrip())
    )
