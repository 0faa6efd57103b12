"""TW606 unseeded-split-across-processes (checkpoints).

The class docstring is its user documentation (`torchwise rules TW606`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.index.records import TOP_LEVEL
from torchwise.review.registry import Rule, rule

_SPLITS = {"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"}
_DISTRIBUTED = (
    "init_process_group", "DistributedDataParallel", "DistributedSampler",
    "FullyShardedDataParallel", "init_distributed", "spawn",
)  # fmt: skip


@rule
class UnseededSplitAcrossProcesses(Rule):
    """## What it does
    Flags `random_split(dataset, lengths)` without a seeded `generator=` in a
    distributed script (one that starts a process group, wraps a model in
    `DistributedDataParallel` or shards data with a `DistributedSampler`) that
    never seeds torch before it.

    ## Why is this bad?
    Every process draws its own split. Each rank trains on a different
    "training set", and samples one rank holds out for testing are trained on
    by another: the test metrics leak, and checkpoints disagree with the data
    that is reloaded later.

    ## Example
    ```python
    from torch.distributed import init_process_group
    from torch.utils.data import random_split

    init_process_group("nccl")
    train_set, test_set = random_split(dataset, [0.9, 0.1])
    ```

    ## Use instead
    ```python
    import torch
    from torch.distributed import init_process_group
    from torch.utils.data import random_split

    init_process_group("nccl")
    generator = torch.Generator().manual_seed(0)
    train_set, test_set = random_split(dataset, [0.9, 0.1], generator=generator)
    ```
    """

    code = "TW606"
    name = "unseeded-split-across-processes"
    family = "checkpoints"
    severity = Severity.WARNING
    in_test_modules = False
    impact = "results"
    message = (
        "`random_split` without a seeded generator draws a different split in every "
        "process: ranks train on each other's test samples"
    )

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        splits = [
            call
            for call in module.calls
            if call.qualname in _SPLITS
            and keyword(call.node, "generator") is None
            and len(call.node.args) < 3
        ]
        if not splits:
            return
        names = [call.qualname or call.method or "" for call in module.calls]
        if not any(marker in name for name in names for marker in _DISTRIBUTED):
            return
        if E.SEED in ctx.project.effects(ctx.project.own(TOP_LEVEL)):
            return
        if any(E.is_seed(call) for call in module.calls):
            return
        for call in splits:
            ctx.report(self, call.node)
