"""TW305 pickle-load (security).

The class docstring is its user documentation (`torchwise rules TW305`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._security import FILE_UNPICKLERS


@rule
class PickleLoad(Rule):
    """## What it does
    Flags `pickle.load`, `pickle.Unpickler`, `dill.load`, `cloudpickle.load`,
    `joblib.load` and `pandas.read_pickle`: a warning, or a hint (`info`)
    where the project writes pickle files with the same library itself (a
    cache, its own vocabulary).

    ## Why is this bad?
    Unpickling a file runs the code the file names: a pickled checkpoint or
    dataset from anywhere you do not control is an executable. Store tensors
    with `safetensors` or `torch.save` + `torch.load(weights_only=True)`, and
    metadata as JSON.

    ## Example
    ```python
    import pickle

    with open("checkpoint.pkl", "rb") as f:
        state = pickle.load(f)
    ```

    ## Use instead
    ```python
    import torch

    state = torch.load("checkpoint.pt", weights_only=True)
    ```
    """

    code = "TW305"
    name = "pickle-load"
    family = "security"
    severity = Severity.WARNING
    message = "`{callee}` unpickles the file: it can run any code the file contains"

    call_names = frozenset(FILE_UNPICKLERS)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in FILE_UNPICKLERS:
            return
        library = qualname.split(".")[0].lstrip("_").replace("cPickle", "pickle")
        if library in ctx.project.pickles_with():
            message = (
                "`{callee}` unpickles the file: it can run any code the file contains "
                "(this project writes its own with `{library}`: a risk only for files "
                "from elsewhere)"
            )
            ctx.report(
                self,
                node,
                message=message,
                severity=Severity.INFO,
                callee=qualname,
                library=library,
            )
            return
        ctx.report(self, node, callee=qualname)
