"""TW713 constructor-rejects-device (tensors).

The class docstring is its user documentation (`torchwise rules TW713`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.tensors import ACCEL
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._tensors import LEGACY

#: Keywords ``torch.autograd.Variable`` accepts.
_VARIABLE_KEYWORDS = frozenset({"requires_grad", "volatile"})


@rule
class ConstructorRejectsDevice(Rule):
    """## What it does
    Flags a `device=` that the constructor cannot honour:

    - the legacy typed constructors (`torch.LongTensor`, `torch.FloatTensor`,
      ...) given `device=` a GPU device, or a device variable that is the GPU
      on a GPU machine: they build CPU tensors only;
    - `Variable(data, device=...)` (or any keyword but `requires_grad` and
      `volatile`): `Variable` takes no device.

    ## Why is this bad?
    `torch.LongTensor([[1]], device="cuda")` raises `RuntimeError: legacy
    constructor expects device type: cpu but device type: cuda was passed`,
    and `Variable(x, device=d)` raises `TypeError: 'device' is an invalid
    keyword argument`. The code works on the CPU and fails the first time it
    runs where it was meant to run.

    ## Example
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokens = torch.LongTensor([[1, 2, 3]], device=device)
    ```

    ## Use instead
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokens = torch.tensor([[1, 2, 3]], dtype=torch.long, device=device)
    ```
    """

    code = "TW713"
    name = "constructor-rejects-device"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = "{problem}"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        if qualname in {"torch.autograd.Variable", "torch.autograd.variable.Variable"}:
            rejected = [k.arg for k in node.keywords if k.arg and k.arg not in _VARIABLE_KEYWORDS]
            if rejected:
                ctx.report(
                    self,
                    node,
                    problem=f"`Variable` takes no `{rejected[0]}=`: this raises TypeError "
                    "on every call; build the tensor with it (`torch.tensor(..., "
                    f"{rejected[0]}=...)`), `Variable` is not needed",
                )
            return
        name = qualname[6:] if qualname.startswith("torch.") else ""
        if name not in LEGACY:
            return
        device = next((k.value for k in node.keywords if k.arg == "device"), None)
        if device is None:
            return
        place = ctx.place_of_device(device, node.lineno, "device=")
        if place is None or place.device != ACCEL:
            return
        ctx.report(
            self,
            node,
            problem=f"`torch.{name}` builds CPU tensors only: with `device="
            f"{ctx.text(device)}` on the GPU it raises RuntimeError (legacy constructor "
            "expects device type: cpu); use `torch.tensor(..., dtype=..., device=...)`",
        )
