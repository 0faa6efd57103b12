"""TW306 pickle-loads (security).

The class docstring is its user documentation (`torchwise rules TW306`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._security import BYTES_UNPICKLERS


@rule
class PickleLoads(Rule):
    """## What it does
    Flags `pickle.loads` (and `dill`/`cloudpickle`'s) on bytes in memory.
    Off by default: the bytes often come from this very process (a queue, a
    collective), where unpickling is fine.

    ## Why is this bad?
    When the bytes were read from a file, a socket or a cache another user can
    write, unpickling them runs the code they name.

    ## Example
    ```python
    import pickle

    state = pickle.loads(blob)
    ```

    ## Use instead
    ```python
    import json

    state = json.loads(blob)
    ```
    """

    code = "TW306"
    name = "pickle-loads"
    family = "security"
    severity = Severity.INFO
    default_enabled = False
    message = "`{callee}` runs any code the bytes contain; make sure they cannot come from outside"

    call_names = frozenset(BYTES_UNPICKLERS)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in BYTES_UNPICKLERS:
            ctx.report(self, node, callee=qualname)
