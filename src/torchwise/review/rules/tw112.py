"""TW112 shuffle-with-sampler (training).

The class docstring is its user documentation (`torchwise rules TW112`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule


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
    impact = "crash"
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
