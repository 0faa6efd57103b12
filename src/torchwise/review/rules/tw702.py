"""TW702 numpy-of-device-tensor (tensors).

The class docstring is its user documentation (`torchwise rules TW702`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.tensors import ACCEL
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._devices import describe

_TO_NUMPY = {"numpy.array", "numpy.asarray"}


@rule
class NumpyOfDeviceTensor(Rule):
    """## What it does
    Flags `.numpy()` (and `np.array(t)`, `np.asarray(t)`) on a tensor known to
    be on the device the script moves its model to, without `.cpu()` first:
    a model's output, a tensor moved with `.to(device)` or `.cuda()`.

    ## Why is this bad?
    NumPy arrays live in host memory: on a GPU the call raises `TypeError:
    can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy
    the tensor to host memory first.` The script works on a laptop and fails
    on the GPU node, usually in the evaluation or logging code that runs last.

    ## Example
    ```python
    import torch
    from torch import nn

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Linear(4, 2).to(device)
    scores = model(torch.randn(8, 4, device=device)).detach().numpy()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Linear(4, 2).to(device)
    scores = model(torch.randn(8, 4, device=device)).detach().cpu().numpy()
    ```
    """

    code = "TW702"
    name = "numpy-of-device-tensor"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = "{tensor} is on the device ({why}): copy it with `.cpu()` before NumPy takes it"
    call_methods = frozenset({"numpy"})
    call_names = frozenset(_TO_NUMPY)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "numpy":
            tensor = func.value
        elif ctx.call_name(node) in _TO_NUMPY and node.args:
            tensor = node.args[0]
        else:
            return
        info = ctx.tensor_of(tensor)
        if info is None or info.device != ACCEL or info.container:
            return
        shown, why = describe(tensor, info, ctx)
        ctx.report(self, node, tensor=shown, why=why)
