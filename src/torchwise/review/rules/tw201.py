"""TW201 dataloader-without-workers (performance).

The class docstring is its user documentation (`torchwise rules TW201`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat, is_true, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._performance import DATALOADERS, in_memory, trains


@rule
class DataLoaderWithoutWorkers(Rule):
    """## What it does
    Flags a `DataLoader` created without `num_workers` for training: in a file
    that trains (calls `backward()` or builds an optimizer), or one that
    shuffles or takes a sampler. Loaders over an in-memory `TensorDataset` or
    a dataset named as synthetic (`RandomDataset`, `fake_data`, ...), and
    calls that pass `**kwargs`, are left alone.

    ## Why is this bad?
    `num_workers` defaults to 0: every batch is loaded, decoded and augmented
    in the training process itself, between steps, while the GPU waits.
    Worker processes prepare the next batches in parallel.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4,
                        pin_memory=True, persistent_workers=True)
    ```
    """

    code = "TW201"
    name = "dataloader-without-workers"
    family = "performance"
    severity = Severity.INFO
    default_enabled = False
    message = "`DataLoader` without `num_workers` loads every batch in the training process"

    call_names = frozenset(DATALOADERS)

    def __init__(self) -> None:
        self.candidates: list[tuple[ast.Call, bool]] = []  # (call, shuffles or samples)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in DATALOADERS:
            return
        if keyword(node, "num_workers") or has_kwargs_splat(node) or len(node.args) >= 6:
            return
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            return
        dataset = node.args[0] if node.args else getattr(keyword(node, "dataset"), "value", None)
        if dataset is not None and in_memory(ctx, dataset):
            return
        shuffle = keyword(node, "shuffle")
        training = (shuffle is not None and is_true(shuffle.value)) or (
            len(node.args) >= 3 and is_true(node.args[2])
        )
        training = training or any(keyword(node, name) for name in ("sampler", "batch_sampler"))
        self.candidates.append((node, training))

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        file_trains = trains(module.calls)
        for call, training in self.candidates:
            if training or file_trains:
                ctx.report(self, call)
