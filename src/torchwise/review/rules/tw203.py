"""TW203 data-parallel (performance).

The class docstring is its user documentation (`torchwise rules TW203`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._performance import DATA_PARALLEL


@rule
class DataParallel(Rule):
    """## What it does
    Flags `nn.DataParallel(...)`.

    ## Why is this bad?
    `DataParallel` runs one process that scatters each batch, replicates the
    model on every step and gathers outputs on the first GPU: it is bound by
    the Python GIL and the first GPU's memory, and PyTorch's documentation
    recommends `DistributedDataParallel` even on a single machine.

    ## Example
    ```python
    from torch import nn

    model = nn.DataParallel(model)
    ```

    ## Use instead
    ```python
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(model.to(rank), device_ids=[rank])  # one process per GPU (torchrun)
    ```
    """

    code = "TW203"
    name = "data-parallel"
    family = "performance"
    severity = Severity.INFO
    default_enabled = False
    message = "`nn.DataParallel` is slower than `DistributedDataParallel`, even on one machine"

    call_names = frozenset(DATA_PARALLEL)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) in DATA_PARALLEL:
            ctx.report(self, node)
