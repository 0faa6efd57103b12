"""TW712 cuda-default-with-shuffled-loader (tensors).

The class docstring is its user documentation (`torchwise rules TW712`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

_DEFAULTS = {"torch.set_default_tensor_type", "torch.set_default_device"}


@rule
class CudaDefaultWithShuffledLoader(Rule):
    """## What it does
    Flags `torch.set_default_tensor_type("torch.cuda.FloatTensor")` (or
    `torch.cuda.FloatTensor`, or `torch.set_default_device("cuda")`) in a
    file that builds a `DataLoader` with `shuffle=True` and no `generator=`.

    ## Why is this bad?
    A shuffling loader draws its order with `torch.randperm(n,
    generator=...)` on a CPU generator it makes itself; with CUDA as the
    default, `randperm` runs on the GPU and refuses the CPU generator:
    `RuntimeError: Expected a 'cuda' device type for generator but found
    'cpu'` when the first epoch starts.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_default_tensor_type("torch.cuda.FloatTensor")
    loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4, shuffle=True)
    ```

    ## Use instead
    ```python
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4, shuffle=True)
    ```
    """

    code = "TW712"
    name = "cuda-default-with-shuffled-loader"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = (
        "CUDA becomes the default device here, and the shuffling `DataLoader` on line "
        "{line} draws its order on the CPU generator: iterating it raises"
    )
    needs_text = ("set_default_",)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        defaults = [c for c in module.calls if c.qualname in _DEFAULTS and _to_cuda(c.node, ctx)]
        if not defaults:
            return
        loader = next((c for c in module.calls if _shuffles_without_generator(c)), None)
        if loader is not None:
            ctx.report(self, defaults[0].node, line=str(loader.line))


def _to_cuda(call: ast.Call, ctx: Context) -> bool:
    given = call.args[0] if call.args else None
    if given is None:
        return False
    return "cuda" in ctx.text(given)


def _shuffles_without_generator(call: F.CallEvent) -> bool:
    if (call.qualname or "").rsplit(".", 1)[-1] != "DataLoader":
        return False
    keywords = {item.arg: item.value for item in call.node.keywords}
    shuffle = keywords.get("shuffle")
    shuffled = isinstance(shuffle, ast.Constant) and shuffle.value is True
    return shuffled and "generator" not in keywords and "sampler" not in keywords
