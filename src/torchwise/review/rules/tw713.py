"""TW713 batch-buffer-with-partial-batch (tensors).

The class docstring is its user documentation (`torchwise rules TW713`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule

_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
#: Calls that preallocate a tensor from sizes.
_ALLOCATORS = frozenset(
    {"Tensor", "FloatTensor", "LongTensor", "DoubleTensor", "HalfTensor", "ByteTensor",
     "zeros", "ones", "empty", "full", "randn", "rand"}
)  # fmt: skip


@rule
class BatchBufferWithPartialBatch(Rule):
    """## What it does
    Flags `buffer.copy_(batch)` in a loop over a `DataLoader` that keeps its
    last, partial batch (no `drop_last=True`), where `buffer` was allocated
    with the loader's `batch_size` as its first dimension
    (`input_A = Tensor(opt.batchSize, 3, 256, 256)`).

    ## Why is this bad?
    The last batch of an epoch holds `len(dataset) % batch_size` samples
    whenever the dataset is not a multiple of the batch size: `copy_` of a
    smaller batch into the full-size buffer raises `RuntimeError: The size of
    tensor a must match the size of tensor b`, at the end of the first epoch,
    after all the time it took to get there.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
    images = torch.empty(batch_size, 3, 256, 256)
    for batch in loader:
        images.copy_(batch["image"])
    ```

    ## Use instead
    ```python
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)
    for batch in loader:
        images = batch["image"]
    ```
    """

    needs_text = (".copy_(",)
    code = "TW713"
    name = "batch-buffer-with-partial-batch"
    family = "tensors"
    severity = Severity.WARNING
    impact = "crash"
    message = (
        "`{buffer}` has the batch size `{size}` as its first dimension (line {buffer_line}), "
        "but `{loader}` keeps its last, partial batch (line {loader_line}): this `copy_` "
        "raises there; pass `drop_last=True` or use the batch itself"
    )

    def leave_module(self, module: object, ctx: Context) -> None:
        if not any("DataLoader" in line for line in ctx.lines):
            return
        tree = ctx.module.node
        loaders: dict[str, tuple[str, int]] = {}  # name -> (batch_size text, line)
        buffers: dict[str, tuple[str, int]] = {}  # name -> (first dimension text, line)
        assigns: list[ast.Assign] = []
        loops: list[ast.For] = []
        for node in subtree(tree):  # one walk: the assignments and the loops
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                assigns.append(node)
            elif isinstance(node, ast.For):
                loops.append(node)
        tensor_types = _tensor_type_aliases(assigns)
        for node in assigns:
            target, value = node.targets[0], node.value
            if not isinstance(target, ast.Name) or not isinstance(value, ast.Call):
                continue
            name = ctx.call_name(value) or ""
            if name in _LOADERS:
                size = _batch_size(value)
                if size is not None and not _drops_last(value):
                    loaders[target.id] = (ctx.text(size), node.lineno)
            elif name.startswith("torch.") or (
                isinstance(value.func, ast.Name) and value.func.id in tensor_types
            ):
                last = name.rsplit(".", 1)[-1] if name else "Tensor"
                if last in _ALLOCATORS and value.args:
                    buffers[target.id] = (ctx.text(value.args[0]), node.lineno)
        if not loaders or not buffers:
            return
        for loop in loops:
            iterated = loop.iter
            if isinstance(iterated, ast.Call) and iterated.args:
                iterated = iterated.args[0]  # enumerate(loader)
            if not isinstance(iterated, ast.Name) or iterated.id not in loaders:
                continue
            size_text, loader_line = loaders[iterated.id]
            for call in subtree(loop):
                if not (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "copy_"
                    and isinstance(call.func.value, ast.Name)
                ):
                    continue
                buffer = call.func.value.id
                if buffers.get(buffer, ("", 0))[0] != size_text:
                    continue
                ctx.report(
                    self,
                    call,
                    buffer=buffer,
                    size=size_text,
                    buffer_line=str(buffers[buffer][1]),
                    loader=iterated.id,
                    loader_line=str(loader_line),
                )


def _tensor_type_aliases(assigns: list[ast.Assign]) -> set[str]:
    """Names bound to a tensor type: `Tensor = torch.cuda.FloatTensor if cuda else torch.Tensor`."""
    aliases: set[str] = set()
    for node in assigns:
        target, value = node.targets[0], node.value
        options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
        if isinstance(target, ast.Name) and all(
            isinstance(option, ast.Attribute) and option.attr.endswith("Tensor")
            for option in options
        ):
            aliases.add(target.id)
    return aliases


def _batch_size(call: ast.Call) -> ast.expr | None:
    for item in call.keywords:
        if item.arg == "batch_size":
            return item.value
    return call.args[1] if len(call.args) > 1 else None


def _drops_last(call: ast.Call) -> bool:
    for item in call.keywords:
        if item.arg == "drop_last":
            return not (isinstance(item.value, ast.Constant) and item.value.value is False)
        if item.arg in {"batch_sampler", "sampler"}:
            return True  # the sampler decides what the batches are
    return False
