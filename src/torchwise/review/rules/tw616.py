"""TW616 load-reads-unsaved-key (checkpoints).

The class docstring is its user documentation (`torchwise rules TW616`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import file_name, file_template, keyword, text_file_template
from torchwise.review.index.records import SaveFact
from torchwise.review.registry import Rule, rule


@rule
class LoadReadsUnsavedKey(Rule):
    """## What it does
    Flags `checkpoint["key"]` on what `torch.load` returned, when every
    `torch.save` of the project that writes that file (the same file name,
    or the same name pattern such as `f"{out}/ckpt_{epoch}.pt"`) writes a
    dict literal without that key.

    ## Why is this bad?
    The resume or the evaluation raises `KeyError` on the first checkpoint
    it opens, typically after the training run that wrote the checkpoint
    has finished: a renamed key (`"optimizer"` saved, `"optim"` read), a
    key that only a newer save writes, or one that was never saved.

    ## Example
    ```python
    import torch

    def save(model, optimizer, epoch):
        torch.save({"model": model.state_dict(), "optim": optimizer.state_dict()}, "last.pt")

    def resume(model, optimizer):
        checkpoint = torch.load("last.pt")
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    ```

    ## Use instead
    ```python
    import torch

    def save(model, optimizer, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")

    def resume(model, optimizer):
        checkpoint = torch.load("last.pt")
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    ```
    """

    code = "TW616"
    name = "load-reads-unsaved-key"
    family = "checkpoints"
    severity = Severity.ERROR
    impact = "crash"
    message = (
        "`{text}` reads a key no save of this file writes: {saves} write{s} {keys}, so the load "
        "raises KeyError"
    )

    def visit_Subscript(self, node: ast.Subscript, ctx: Context) -> None:
        if not isinstance(node.ctx, ast.Load) or not isinstance(node.slice, ast.Constant):
            return
        key = node.slice.value
        if not isinstance(key, str):
            return
        loaded = ctx.value_of(node.value)
        if loaded is None or loaded.kind != F.LOADED or loaded.key is not None:
            return  # not the whole checkpoint (an item of an item is another dict)
        call = loaded.node
        if not isinstance(call, ast.Call) or (ctx.call_name(call) or "") not in (
            "torch.load",
            "torch.serialization.load",
        ):
            return
        if any(repr(key) in test or f'"{key}"' in test for test, _ in ctx.branch):
            return  # `if "optimizer" in checkpoint:`: read only when there
        saves = _writers(call, ctx)
        if not saves or any(key in save.keys for _, save in saves):
            return
        written = sorted({name for _, save in saves for name in save.keys})
        places = ", ".join(f"{path.rsplit('/', 1)[-1]}:{save.line}" for path, save in saves[:3])
        ctx.report(
            self,
            node,
            text=ctx.text(node),
            saves=f"the saves at {places}",
            s="" if len(saves) > 1 else "s",
            keys=", ".join(repr(name) for name in written),
        )


def _writers(call: ast.Call, ctx: Context) -> list[tuple[str, SaveFact]]:
    """The project's saves that write the loaded file, when each writes a dict
    literal whose keys are all known (nothing added later); [] otherwise."""
    path = call.args[0] if call.args else getattr(keyword(call, "f"), "value", None)
    if path is None:
        return []
    name, template = file_name(path), file_template(path)
    found = []
    for where, save in ctx.project.saves():
        same = (name is not None and save.file_name == name) or (
            template is not None and text_file_template(save.path_text) == template
        )
        if not same:
            continue
        if save.whole is not None or not save.keys or save.payload_line is not None:
            return []  # not a dict literal written at the save: its keys are not all known
        found.append((where, save))
    return found
