"""TW416 load-fails-with-weights-only (deprecated).

The class docstring is its user documentation (`torchwise rules TW416`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat, is_false, is_true
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loads import (
    explicit_weights_only,
    refused_content,
    runs_on_weights_only_default,
)

#: Calls that let a weights_only load rebuild the classes they name.
_ALLOWLISTS = frozenset(
    {"torch.serialization.safe_globals", "torch.serialization.add_safe_globals"}
)


@rule
class LoadFailsWithWeightsOnly(Rule):
    """## What it does
    Flags `torch.load(path)` of a file that holds more than tensors, where
    torch 2.6 and later refuse it: the code uses what it loaded as an
    `nn.Module` or an optimizer (calls it, puts it in eval mode, steps it,
    passes it where the project uses a model), or the project's own
    `torch.save` writes a whole module, an optimizer, an `argparse.Namespace`
    or a NumPy array anywhere in the file the load reads: the same file name,
    the same name pattern (`f"{out}/ckpt_{epoch}.pt"`), or, when no name
    links them, a checkpoint whose keys include every key the load reads
    (more than one generic key such as `"model"`). The weights-only
    unpickler stops at the first object outside its allowlist, so one
    refused value fails the whole file, whatever key the load reads. Not
    flagged when the project pins torch below 2.6 or the call passes
    `weights_only=False`.

    ## Why is this bad?
    Since PyTorch 2.6, `torch.load` defaults to `weights_only=True` and raises
    `UnpicklingError: Weights only load failed` for any pickled object that is
    not a tensor, a container or a primitive. The script worked on the torch it
    was written for and crashes on every current one, usually at resume or
    evaluation time. Passing `weights_only=True` (TW301's suggestion) would lock
    the failure in; saving `state_dict()`s is the fix that lasts.

    ## Example
    ```python
    import torch

    torch.save(model, "model.pt")
    model = torch.load("model.pt")
    model.eval()
    ```

    ## Use instead
    ```python
    import torch

    torch.save(model.state_dict(), "model.pt")
    model = Net()
    model.load_state_dict(torch.load("model.pt"))
    model.eval()
    ```
    For a file you created and trust, `torch.load(path, weights_only=False)`
    restores the old behaviour.
    """

    code = "TW416"
    name = "load-fails-with-weights-only"
    family = "deprecated"
    severity = Severity.ERROR
    message = (
        "`torch.load` of {what} fails on torch >= 2.6 (`weights_only=True` is the default): "
        "save a `state_dict`, or pass `weights_only=False` for a file you trust"
    )

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if any(call.qualname in _ALLOWLISTS for call in module.calls):
            return  # the file allowlists classes for weights_only loads: they may well load
        for load in module.loads.values():
            node = load.node
            weights_only = explicit_weights_only(node)
            if is_false(weights_only) or (weights_only is not None and not is_true(weights_only)):
                continue  # the caller decided, or False: full unpickling on purpose
            if weights_only is None and (
                has_kwargs_splat(node) or not runs_on_weights_only_default(ctx)
            ):
                continue
            what = refused_content(load, ctx)
            if what is not None:
                ctx.report(self, node, what=what)
