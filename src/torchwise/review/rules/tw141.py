"""TW141 evaluation-loader-drops-samples (training).

The class docstring is its user documentation (`torchwise rules TW141`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_true, keyword
from torchwise.review.registry import Rule, rule

_EVALUATION = re.compile(
    r"(^|_)(val|valid|validation|eval|evaluation|test|dev)(_|$|loader|set|data)"
)


@rule
class EvaluationLoaderDropsSamples(Rule):
    """## What it does
    Flags `DataLoader(..., drop_last=True)` for evaluation data: a loader, or
    the dataset it wraps, named for validation, evaluation or test
    (`val_loader`, `test_set`, `eval_dataset`, ...).

    ## Why is this bad?
    `drop_last=True` discards the final partial batch: up to `batch_size - 1`
    samples are never scored, so metrics are computed on a subset that changes
    with the batch size (and a set smaller than one batch yields no batch at
    all). Dropping the last batch helps training (batch norm, stable step
    sizes); evaluation must see every sample.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    val_loader = DataLoader(val_set, batch_size=64, shuffle=False, drop_last=True)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    val_loader = DataLoader(val_set, batch_size=64, shuffle=False)
    ```
    """

    code = "TW141"
    name = "evaluation-loader-drops-samples"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "`drop_last=True` on evaluation data (`{name}`): the last partial batch is never scored"
    )

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not (ctx.call_name(node) or "").endswith("DataLoader"):
            return
        drop = keyword(node, "drop_last")
        if drop is None or not is_true(drop.value):
            return
        size = keyword(node, "batch_size")
        size_value = (
            size.value if size is not None else (node.args[1] if len(node.args) > 1 else None)
        )
        if isinstance(size_value, ast.Constant) and size_value.value == 1:
            return  # batches of one: there is no partial batch to drop
        dataset = node.args[0] if node.args else getattr(keyword(node, "dataset"), "value", None)
        names = [ctx.dotted(dataset) if dataset is not None else None]
        parent = ctx.parent
        if isinstance(parent, ast.Assign):
            names += [ctx.dotted(target) for target in parent.targets]
        for name in names:
            last = (name or "").rsplit(".", 1)[-1].lower()
            if last and _EVALUATION.search(last) and "train" not in last:
                ctx.report(self, drop, name=name or "")
                return
