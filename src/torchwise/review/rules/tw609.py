"""TW609 payload-refused-by-weights-only (checkpoints).

The class docstring is its user documentation (`torchwise rules TW609`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.index.records import LoadFact, SaveFact
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loads import (
    payload_refused,
    runs_on_weights_only_default,
    same_format,
    saved_template,
)
from torchwise.review.rules._util import shown_path

_EXAMPLE_SAVE = "torch.save"


@rule
class PayloadRefusedByWeightsOnly(Rule):
    """## What it does
    Flags a `torch.save` whose payload holds what `torch.load` refuses by
    default since torch 2.6 (`weights_only=True`): a whole `nn.Module` or
    optimizer object (also inside a list, a tuple or a dict), an
    `argparse.Namespace`, a NumPy array or scalar; when the project reads
    that file back without `weights_only=False` (the same file name or name
    pattern, or a load that reads only keys this checkpoint writes). Any
    refused value fails the whole load, whatever key the load then reads.
    TW416 flags the load; this flags the save, where the payload is made.

    ## Why is this bad?
    The checkpoint is written fine and the run looks healthy; resuming,
    evaluating or exporting it fails later with `UnpicklingError: Weights
    only load failed`. Checkpoints that hold only tensors, state dicts and
    plain Python values load with the safe default.

    ## Example
    ```python
    import torch

    def save(model, optimizer, path):
        torch.save({"model": model, "optimizer": optimizer}, path + "/last.pt")

    def resume(path):
        return torch.load(path + "/last.pt")["model"]
    ```

    ## Use instead
    ```python
    import torch

    def save(model, optimizer, path):
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save(state, path + "/last.pt")

    def resume(model, path):
        model.load_state_dict(torch.load(path + "/last.pt")["model"])
    ```
    """

    code = "TW609"
    name = "payload-refused-by-weights-only"
    family = "checkpoints"
    severity = Severity.ERROR
    impact = "crash"
    message = (
        "this checkpoint holds {what}, which `torch.load` refuses by default since torch 2.6: "
        "{reader} reads it back and fails; save state dicts and plain values"
    )
    call_names = frozenset({_EXAMPLE_SAVE})

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if not runs_on_weights_only_default(ctx):
            return
        loads = [
            (path, load)
            for path, load in ctx.project.loads()
            if load.weights_only is None or load.weights_only == "true"
        ]
        if not loads:
            return
        saves = [save for path, save in ctx.project.saves() if path == ctx.path]
        calls = {c.line: c.node for c in module.calls if c.qualname == _EXAMPLE_SAVE}
        for save in saves:
            found = _refused_and_read(save, loads, ctx)
            node = calls.get(save.line)
            if found is not None and node is not None:
                what, reader = found
                payload = "" if save.payload_line is None else str(save.payload_line)
                ctx.report(self, node, what=what, reader=reader, payload_line=payload)


def _refused_and_read(
    save: SaveFact, loads: list[tuple[str, LoadFact]], ctx: Context
) -> tuple[str, str] | None:
    refused = payload_refused(save)
    if refused is None:
        return None
    template = saved_template(save)
    for path, load in loads:
        linked = (
            (save.file_name is not None and load.file_name == save.file_name)
            or (template is not None and load.file_template == template)
            or same_format(load.keys, save)
        )
        if not linked:
            continue
        where = (
            f"`torch.load` on line {load.line}"
            if path == ctx.path
            else (f"`torch.load` at {shown_path(path, ctx)}:{load.line}")
        )
        return refused, where
    return None
