"""TW409 legacy-tensor-constructor (deprecated).

The class docstring is its user documentation (`torchwise rules TW409`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated_tensor import LEGACY_CONSTRUCTORS
from torchwise.review.rules._util import in_compat_code


@rule
class LegacyTensorConstructor(Rule):
    """## What it does
    Flags calls of the legacy typed constructors: `torch.FloatTensor(...)`,
    `torch.LongTensor(...)`, `torch.cuda.FloatTensor(...)` and the rest. Off
    by default: PyTorch discourages them but does not warn, and code that
    initialises the result right away is correct.

    ## Why is this bad?
    Their meaning depends on the arguments: `torch.FloatTensor([2, 3])` is a
    tensor holding 2 and 3, while `torch.FloatTensor(2, 3)` is an
    *uninitialised* 2x3 tensor full of garbage. The `torch.cuda` variants
    hard-code the device. `torch.tensor` and `torch.empty`/`torch.zeros` with
    `dtype=` and `device=` say what they mean.

    ## Example
    ```python
    import torch

    weights = torch.FloatTensor([0.2, 0.8])
    buffer = torch.cuda.FloatTensor(4, 16)
    ```

    ## Use instead
    ```python
    import torch

    weights = torch.tensor([0.2, 0.8], dtype=torch.float32)
    buffer = torch.zeros(4, 16, device="cuda")
    ```
    """

    code = "TW409"
    name = "legacy-tensor-constructor"
    family = "deprecated"
    severity = Severity.INFO
    default_enabled = False
    message = "legacy constructor `{old}`; use `{new}`"

    call_names = frozenset(LEGACY_CONSTRUCTORS)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        dtype = LEGACY_CONSTRUCTORS.get(qualname)
        if dtype is None:
            return
        device = ', device="cuda"' if qualname.startswith("torch.cuda.") else ""
        data = node.args[0] if len(node.args) == 1 else None
        if isinstance(data, (ast.List, ast.Tuple, ast.ListComp)):
            new = f"torch.tensor(data, dtype=torch.{dtype}{device})"
        elif data is not None and not isinstance(data, ast.Constant):
            new = f"torch.as_tensor(data, dtype=torch.{dtype}{device}) or torch.empty(...)"
        else:
            new = f"torch.empty(*size, dtype=torch.{dtype}{device})"
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, old=qualname, new=new)
