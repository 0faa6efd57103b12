"""TW305 pickle-load (security).

The class docstring is its user documentation (`torchwise rules TW305`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._provenance import EXTERNAL, provenance
from torchwise.review.rules._security import FILE_UNPICKLERS


@rule
class PickleLoad(Rule):
    """## What it does
    Flags `pickle.load`, `pickle.Unpickler`, `dill.load`, `cloudpickle.load`,
    `joblib.load` and `pandas.read_pickle`: a warning, or a hint (`info`)
    where the project writes pickle files with the same library itself (a
    cache, its own vocabulary) and the path does not come from the command
    line, a configuration, the environment or a download (those are someone
    else's files whatever the project writes: still a warning, naming where
    the path comes from).

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
        path = _opened_path(node, ctx)
        origin = provenance(path, ctx)
        if origin.kind in EXTERNAL and not _dumped_here(path, ctx):
            ctx.report(
                self,
                node,
                message=self.message + ": {origin}",
                callee=qualname,
                origin=origin.describe(),
            )
            return
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


def _opened_path(node: ast.Call, ctx: Context) -> ast.expr | None:
    """The path a load reads: ``pickle.load(open(path, "rb"))``, ``joblib.load(path)``,
    or the ``open`` a name was bound to in a ``with`` (``with open(path) as f``)."""
    argument = node.args[0] if node.args else None
    if isinstance(argument, ast.Call) and (
        ctx.call_name(argument) or ctx.text(argument.func)
    ).endswith("open"):
        return argument.args[0] if argument.args else None
    if isinstance(argument, ast.Name):
        for parent in reversed(ctx.parents):
            if isinstance(parent, (ast.With, ast.AsyncWith)):
                for item in parent.items:
                    opened = item.context_expr
                    bound = item.optional_vars
                    if (
                        isinstance(bound, ast.Name)
                        and bound.id == argument.id
                        and isinstance(opened, ast.Call)
                        and opened.args
                    ):
                        return opened.args[0]
    return argument


def _dumped_here(path: ast.expr | None, ctx: Context) -> bool:
    """Whether the file writes the same path with a pickling ``dump`` (its own cache)."""
    if path is None:
        return False
    text = ctx.text(path)
    for node in ctx.module_nodes():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in ("dump", "to_pickle"):
            continue
        for argument in node.args[1:2] or node.args[:1]:
            target = argument
            if isinstance(target, ast.Call) and target.args:
                target = target.args[0]  # dump(obj, open(path, "wb"))
            if ctx.text(target) == text:
                return True
    return False
