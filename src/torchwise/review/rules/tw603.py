"""TW603 checkpoint-without-optimizer (checkpoints).

The class docstring is its user documentation (`torchwise rules TW603`).
"""

from __future__ import annotations

import ast

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._checkpoints import _PROGRESS_KEYS, _SAVE, _dict_items, _state_dict_of
from torchwise.review.rules._performance import trains


@rule
class CheckpointWithoutOptimizer(Rule):
    """## What it does
    Flags `torch.save({...})` of a resumable checkpoint (a dict holding a
    model's `state_dict()`, in a file that trains or next to an `epoch`/`step`
    entry) that has no optimizer state, in a file that does not save the
    optimizer's `state_dict()` on its own either.

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
    message = "checkpoint saves the model but not the optimizer: resuming resets its state"

    def __init__(self) -> None:
        self.candidates: list[tuple[ast.Call, bool]] = []  # (call, has a progress key)
        self.saves_optimizer = False

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in _SAVE or not node.args:
            return
        saved = node.args[0]
        source = _state_dict_of(saved)
        if source is not None and ctx.kind_of(source) == F.OPTIMIZER:
            self.saves_optimizer = True  # torch.save(optimizer.state_dict(), ...)
            return
        items = _dict_items(saved)
        if items is None:
            return
        has_model = has_optimizer = progress = False
        for key, value in items:
            owner = _state_dict_of(value)
            kind = None if owner is None else ctx.kind_of(owner)
            optimizer_key = key is not None and ("optim" in key.lower() or key.lower() == "opt")
            if optimizer_key or kind == F.OPTIMIZER:
                has_optimizer = True
            elif kind == F.MODULE or (owner is not None and ctx.dotted(owner) == "self"):
                has_model = True
            progress = progress or (key is not None and key.lower() in _PROGRESS_KEYS)
        if has_model and not has_optimizer:
            self.candidates.append((node, progress))

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if self.saves_optimizer:
            return
        file_trains = trains(module.calls)
        for call, progress in self.candidates:
            if progress or file_trains:
                ctx.report(self, call)
