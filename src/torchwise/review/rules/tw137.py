"""TW137 register-buffer-non-tensor (modules).

The class docstring is its user documentation (`torchwise rules TW137`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule


@rule
class RegisterBufferNonTensor(Rule):
    """## What it does
    Flags `register_buffer(name, value)` whose value is a Python literal
    (a number, a string, a list, a tuple or a dict) instead of a tensor.

    ## Why is this bad?
    Buffers must be tensors (or `None`): the call raises `TypeError` when the
    module is built. A list of numbers wants `torch.tensor(...)`.

    ## Example
    ```python
    from torch import nn

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", 0.5)
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor(0.5))
    ```
    """

    code = "TW137"
    name = "register-buffer-non-tensor"
    family = "modules"
    severity = Severity.ERROR
    impact = "crash"
    message = "`register_buffer` needs a tensor, not a {kind}"

    call_methods = frozenset({"register_buffer"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "register_buffer":
            return
        value = node.args[1] if len(node.args) >= 2 else None
        tensor = keyword(node, "tensor")
        if tensor is not None:
            value = tensor.value
        if isinstance(value, ast.Constant) and value.value is not None:
            kind = type(value.value).__name__
        elif isinstance(value, (ast.List, ast.Tuple, ast.Dict)):
            kind = type(value).__name__.lower()
        else:
            return
        ctx.report(self, node, kind=kind)
