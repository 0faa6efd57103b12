"""TW204 hard-coded-cuda (performance).

The class docstring is its user documentation (`torchwise rules TW204`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._performance import cuda_guarded


@rule
class HardCodedCuda(Rule):
    """## What it does
    Flags `.cuda()` and `.to("cuda")` outside an `if` that checks for CUDA.

    ## Why is this bad?
    The code then runs only on NVIDIA GPUs: it fails on a CPU-only machine,
    on Apple silicon (`mps`), on other accelerators, and cannot be pointed at
    a given GPU by configuration. A `device` chosen once and passed around
    runs everywhere.

    ## Example
    ```python
    model = model.cuda()
    x = x.to("cuda")
    ```

    ## Use instead
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device)
    x = x.to(device)
    ```
    """

    code = "TW204"
    name = "hard-coded-cuda"
    family = "performance"
    severity = Severity.INFO
    default_enabled = False
    message = "`{call}` hard-codes CUDA: pass a configurable `device`"

    call_methods = frozenset({"cuda", "to"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in {"cuda", "to"}:
            return
        if ctx.qualname(func.value) is not None or isinstance(func.value, ast.Call):
            return  # a module attribute, or super().cuda() in an override
        function = ctx.function
        if function is not None and function.name in {"cuda", "to", "_apply"}:
            return  # implementing .cuda() for a custom class
        if func.attr == "cuda" and (node.args or node.keywords):
            return  # .cuda(device): the device is chosen by the caller
        if func.attr == "to":
            first = node.args[0] if node.args else getattr(keyword(node, "device"), "value", None)
            if not (isinstance(first, ast.Constant) and str(first.value).startswith("cuda")):
                return
        if cuda_guarded(ctx):
            return
        ctx.report(self, node, call=".cuda()" if func.attr == "cuda" else '.to("cuda")')
