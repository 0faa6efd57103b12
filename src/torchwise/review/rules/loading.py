"""Data-loading and state-loading rules used by training scripts."""

from __future__ import annotations

import ast

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    is_tensor_backward,
    regions,
    top_level_calls,
)
from torchwise.review.rules._util import is_false, keyword


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


@rule
class ShuffleWithSampler(Rule):
    """## What it does
    Flags `DataLoader(..., shuffle=True, sampler=...)` (or `batch_sampler=`).

    ## Why is this bad?
    `shuffle` and a sampler are mutually exclusive: `DataLoader` raises
    `ValueError` as soon as the sampler is not `None`, typically only in the
    distributed configuration that nobody ran locally.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, shuffle=True, sampler=sampler)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, shuffle=sampler is None, sampler=sampler)
    ```
    """

    code = "TW112"
    name = "shuffle-with-sampler"
    family = "training"
    severity = Severity.ERROR
    message = (
        "`shuffle=True` with `{argument}=`: DataLoader raises ValueError when the sampler is set"
    )

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not (ctx.call_name(node) or "").endswith("DataLoader"):
            return
        shuffle = keyword(node, "shuffle")
        if shuffle is None or not (
            isinstance(shuffle.value, ast.Constant) and shuffle.value.value is True
        ):
            return
        for argument in ("sampler", "batch_sampler"):
            item = keyword(node, argument)
            if item is not None and not (
                isinstance(item.value, ast.Constant) and item.value.value is None
            ):
                ctx.report(self, node, argument=argument)
                return


@rule
class NonStrictLoadIgnored(Rule):
    """## What it does
    Flags `load_state_dict(..., strict=False)` whose result (the missing and
    unexpected keys) is thrown away, in a training script (a file that calls
    `backward()` or has an `if __name__ == "__main__":` entry point).

    ## Why is this bad?
    `strict=False` turns every key mismatch into a silent no-op: a renamed
    layer or a `module.` prefix from `DataParallel` means the weights are simply
    not loaded and the model runs with its random initialisation.

    ## Example
    ```python
    if __name__ == "__main__":
        model.load_state_dict(state, strict=False)
    ```

    ## Use instead
    ```python
    if __name__ == "__main__":
        result = model.load_state_dict(state, strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise RuntimeError(f"checkpoint mismatch: {result}")
    ```
    """

    code = "TW113"
    name = "non-strict-load-ignored"
    family = "training"
    severity = Severity.WARNING
    message = (
        "`load_state_dict(strict=False)` result ignored: missing and unexpected keys go unnoticed"
    )

    def __init__(self) -> None:
        self.candidates: list[ast.Call] = []
        self.is_script = False

    def visit_If(self, node: ast.If, ctx: Context) -> None:
        if ctx.function is None and "__main__" in ctx.text(node.test):
            self.is_script = True

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "load_state_dict"):
            return
        strict = keyword(node, "strict")
        if strict is not None and is_false(strict.value) and isinstance(ctx.parent, ast.Expr):
            self.candidates.append(node)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        # Libraries load partial state on purpose (sharded loading, adapters,
        # weight averaging); the silent mismatch bites in training scripts.
        if self.is_script or any(is_tensor_backward(c) for c in module.calls):
            for node in self.candidates:
                ctx.report(self, node)
