"""TW111 sampler-without-set-epoch (training).

The class docstring is its user documentation (`torchwise rules TW111`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_false, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    is_tensor_backward,
    regions,
    top_level_calls,
)


@rule
class SamplerWithoutSetEpoch(Rule):
    """## What it does
    Flags a shuffling `DistributedSampler` created in a function (or script)
    that loops over epochs or trains, in a file that never calls
    `sampler.set_epoch(epoch)`.

    ## Why is this bad?
    `DistributedSampler` seeds its shuffle with the epoch number. Without
    `set_epoch`, every epoch visits the data in exactly the same order, which
    hurts convergence and makes multi-epoch runs equivalent to repeating one
    permutation.

    ## Example
    ```python
    from torch.utils.data import DataLoader, DistributedSampler

    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(10):
        for batch in loader:
            train_step(batch)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader, DistributedSampler

    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(10):
        sampler.set_epoch(epoch)
        for batch in loader:
            train_step(batch)
    ```
    """

    code = "TW111"
    name = "sampler-without-set-epoch"
    family = "training"
    severity = Severity.WARNING
    message = (
        "`DistributedSampler` is never given `set_epoch(epoch)`: every epoch uses the same order"
    )

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if any(c.method == "set_epoch" for c in module.calls):
            return
        for function, loops in regions(module):
            calls = function.calls if function is not None else top_level_calls(module)
            # Only where the sampler is used across epochs in view: a helper that
            # builds and returns a sampler leaves set_epoch to its caller.
            epoch_loop = any(inner.outer is loop for loop in loops for inner in loops)
            if not (epoch_loop or any(is_tensor_backward(c) for c in calls)):
                continue
            for creation in calls:
                if not (creation.qualname or "").endswith("DistributedSampler"):
                    continue
                shuffle = keyword(creation.node, "shuffle")
                if shuffle is not None and is_false(shuffle.value):
                    continue  # a validation sampler: same order every epoch is fine
                ctx.report(self, creation.node)
