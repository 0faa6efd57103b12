"""TW303 numpy-load-allow-pickle (security).

The class docstring is its user documentation (`torchwise rules TW303`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_true
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._provenance import EXTERNAL, provenance
from torchwise.review.rules._security import argument


@rule
class NumpyAllowPickle(Rule):
    """## What it does
    Flags `np.load(..., allow_pickle=True)`: a warning when the path comes from
    the command line, a configuration, the environment or a download (someone
    else's file, and the message says where it comes from); a hint (`info`)
    otherwise, for the arrays a project's own preprocessing writes.

    ## Why is this bad?
    With `allow_pickle=True`, NumPy unpickles object arrays stored in the
    file, and unpickling runs whatever code the file names. Arrays of numbers
    never need it.

    ## Example
    ```python
    import numpy as np

    features = np.load("features.npy", allow_pickle=True)
    ```

    ## Use instead
    ```python
    import numpy as np

    features = np.load("features.npy")
    ```
    """

    code = "TW303"
    name = "numpy-load-allow-pickle"
    family = "security"
    severity = Severity.WARNING
    message = "`numpy.load(allow_pickle=True)` unpickles object arrays: it can run any code"

    call_names = frozenset({"numpy.load"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) != "numpy.load" or not is_true(argument(node, "allow_pickle", 2)):
            return
        origin = provenance(argument(node, "file", 0), ctx)
        if origin.kind in EXTERNAL:
            ctx.report(self, node, message=self.message + ": {origin}", origin=origin.describe())
            return
        ctx.report(self, node, severity=Severity.INFO)
