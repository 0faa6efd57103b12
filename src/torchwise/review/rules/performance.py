"""Performance (TW2xx): code that is correct but makes the GPU wait.

Most of these matter only where code runs every step (a training loop, a
module's ``forward``), so they report there and stay quiet in one-off setup.
The opinionated ones (syncs, DataParallel, hard-coded ``.cuda()``) are INFO
rules, off by default: ``--extend-select TW202`` turns one on.
"""

from __future__ import annotations

import ast

from torchwise.review import facts as F
from torchwise.review.context import Context, kind_from_callee
from torchwise.review.findings import Applicability, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._tensors import (
    DEVICE_DEPENDENT,
    chained_method,
    device_text,
    factory,
    move_into_factory,
    move_target,
    passes_device,
)
from torchwise.review.rules._util import (
    has_kwargs_splat,
    is_false,
    is_true,
    keyword,
    remove_keyword,
)

_DATALOADERS = {"torch.utils.data.DataLoader"}
_SYNTHETIC = ("random", "synthetic", "fake", "dummy")
_IN_MEMORY = {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}


def trains(calls: list[F.CallEvent]) -> bool:
    """Whether these calls train something: ``backward()`` or an optimizer."""
    for call in calls:
        if call.method == "backward":
            return True
        if call.qualname is not None and kind_from_callee(call.qualname) == F.OPTIMIZER:
            return True
        if call.method == "step" and call.receiver_kind == F.OPTIMIZER:
            return True
    return False


def _guarded(ctx: Context) -> bool:
    """The current node sits under an ``if`` inside the innermost loop."""
    for parent in reversed(ctx.parents):
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)):
            return False
        if isinstance(parent, (ast.If, ast.IfExp)):
            return True
    return False


def _in_memory(ctx: Context, dataset: ast.expr) -> bool:
    """A ``TensorDataset`` or a synthetic one (``RandomDataset(...)``,
    ``self.fake_train``): batches are slices of memory, workers would not help."""
    if isinstance(dataset, ast.Call):
        if ctx.call_name(dataset) in _IN_MEMORY:
            return True
        dataset = dataset.func
    name = (ctx.dotted(dataset) or "").rsplit(".", 1)[-1].lower()
    return any(word in name for word in _SYNTHETIC)


@rule
class DataLoaderWithoutWorkers(Rule):
    """## What it does
    Flags a `DataLoader` created without `num_workers` for training: in a file
    that trains (calls `backward()` or builds an optimizer), or one that
    shuffles or takes a sampler. Loaders over an in-memory `TensorDataset` or
    a dataset named as synthetic (`RandomDataset`, `fake_data`, ...), and
    calls that pass `**kwargs`, are left alone.

    ## Why is this bad?
    `num_workers` defaults to 0: every batch is loaded, decoded and augmented
    in the training process itself, between steps, while the GPU waits.
    Worker processes prepare the next batches in parallel.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4,
                        pin_memory=True, persistent_workers=True)
    ```
    """

    code = "TW201"
    name = "dataloader-without-workers"
    family = "performance"
    severity = Severity.WARNING
    message = "`DataLoader` without `num_workers` loads every batch in the training process"

    def __init__(self) -> None:
        self.candidates: list[tuple[ast.Call, bool]] = []  # (call, shuffles or samples)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in _DATALOADERS:
            return
        if keyword(node, "num_workers") or has_kwargs_splat(node) or len(node.args) >= 6:
            return
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            return
        dataset = node.args[0] if node.args else getattr(keyword(node, "dataset"), "value", None)
        if dataset is not None and _in_memory(ctx, dataset):
            return
        shuffle = keyword(node, "shuffle")
        training = (shuffle is not None and is_true(shuffle.value)) or (
            len(node.args) >= 3 and is_true(node.args[2])
        )
        training = training or any(keyword(node, name) for name in ("sampler", "batch_sampler"))
        self.candidates.append((node, training))

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        file_trains = trains(module.calls)
        for call, training in self.candidates:
            if training or file_trains:
                ctx.report(self, call)


_SYNCS = {"item", "cpu", "numpy", "tolist"}


@rule
class SyncInTrainingLoop(Rule):
    """## What it does
    Flags `.item()`, `.cpu()`, `.numpy()`, `.tolist()` and `print(loss)` run on
    every iteration of a training loop (a loop that calls `backward()`).
    Calls under an `if` in the loop (logging every N steps) are not flagged.

    ## Why is this bad?
    Each one copies a value to the host, so the CPU waits for every queued
    GPU kernel to finish: the pipeline drains on every step, and the next
    step's kernels are launched late. Accumulate on the device and read it
    every N steps.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.item()
    ```

    ## Use instead
    ```python
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.detach()
        if step % 100 == 0:
            print(running.item() / (step + 1))
    ```
    """

    code = "TW202"
    name = "sync-in-training-loop"
    family = "performance"
    severity = Severity.INFO
    default_enabled = False
    message = "{what} every training step waits for the GPU (a host sync)"

    def __init__(self) -> None:
        self.unguarded: set[int] = set()  # ids of sync calls not under an `if` in their loop
        self.reported: set[int] = set()

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not ctx.loops or _guarded(ctx):
            return
        func = node.func
        sync = isinstance(func, ast.Attribute) and func.attr in _SYNCS and not node.args
        printed = isinstance(func, ast.Name) and func.id == "print"
        if sync or (printed and any(ctx.kind_of(a) in {F.LOSS, F.OUTPUT} for a in node.args)):
            self.unguarded.add(id(node))

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        if not any(call.method == "backward" for call in loop.calls):
            return
        for call in loop.calls:
            node = call.node
            if id(node) in self.unguarded and id(node) not in self.reported:
                self.reported.add(id(node))
                what = "`print(...)`" if call.method is None else f"`.{call.method}()`"
                ctx.report(self, node, what=what)


_DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel"}


@rule
class DataParallel(Rule):
    """## What it does
    Flags `nn.DataParallel(...)`.

    ## Why is this bad?
    `DataParallel` runs one process that scatters each batch, replicates the
    model on every step and gathers outputs on the first GPU: it is bound by
    the Python GIL and the first GPU's memory, and PyTorch's documentation
    recommends `DistributedDataParallel` even on a single machine.

    ## Example
    ```python
    from torch import nn

    model = nn.DataParallel(model)
    ```

    ## Use instead
    ```python
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(model.to(rank), device_ids=[rank])  # one process per GPU (torchrun)
    ```
    """

    code = "TW203"
    name = "data-parallel"
    family = "performance"
    severity = Severity.INFO
    default_enabled = False
    message = "`nn.DataParallel` is slower than `DistributedDataParallel`, even on one machine"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) in _DATA_PARALLEL:
            ctx.report(self, node)


def _cuda_guarded(ctx: Context) -> bool:
    """Inside ``if torch.cuda.is_available():`` or ``... if cuda_ok else ...``."""
    for parent in ctx.parents:
        if isinstance(parent, (ast.If, ast.IfExp)) and "cuda" in ctx.text(parent.test):
            return True
    return False


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
        if _cuda_guarded(ctx):
            return
        ctx.report(self, node, call=".cuda()" if func.attr == "cuda" else '.to("cuda")')


@rule
class ZeroGradNotToNone(Rule):
    """## What it does
    Flags `zero_grad(set_to_none=False)`.

    ## Why is this bad?
    Since PyTorch 2.0, `zero_grad()` sets gradients to `None`, which frees
    their memory and skips a memset kernel per parameter; the next
    `backward()` writes the gradient instead of adding to zeros. Keeping zero
    tensors costs memory and time, and is only needed by code that reads
    `.grad` between `zero_grad()` and `backward()`.

    ## Example
    ```python
    optimizer.zero_grad(set_to_none=False)
    ```

    ## Use instead
    ```python
    optimizer.zero_grad()
    ```

    ## Fix safety
    Unsafe: afterwards `p.grad` is `None` rather than zeros until the next
    `backward()`, which breaks code that reads or adds to it in between.
    """

    code = "TW205"
    name = "zero-grad-not-to-none"
    family = "performance"
    severity = Severity.INFO
    default_enabled = False
    message = "`zero_grad(set_to_none=False)` keeps zero tensors: the default frees them"
    fix = Applicability.UNSAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "zero_grad":
            return
        item = keyword(node, "set_to_none")
        if item is None and len(node.args) == 1:
            if is_false(node.args[0]):
                ctx.report(self, node)
            return
        if item is not None and is_false(item.value):
            edit = remove_keyword(ctx, node, item)
            fix = Fix("Use the default `set_to_none=True`", (edit,), Applicability.UNSAFE)
            ctx.report(self, node, fix=fix)


def _moved_to(ctx: Context, move: ast.Call) -> str | None:
    """The device a ``.to(...)``/``.cuda()`` call clearly moves to, else None."""
    func = move.func
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "cuda":
        return '"cuda"'
    if func.attr != "to":
        return None
    device = keyword(move, "device")
    first = device.value if device is not None else (move.args[0] if move.args else None)
    return None if first is None else device_text(ctx, first)


@rule
class CreatedThenMoved(Rule):
    """## What it does
    Flags `torch.zeros/ones/empty/full/arange/eye/rand/randn/...(...)` followed
    directly by `.to(device)` or `.cuda()`, in code that runs repeatedly: inside
    a loop, or in a method of an `nn.Module` other than `__init__`.

    ## Why is this bad?
    The tensor is allocated and filled on the CPU, then copied to the device
    through pageable memory, which blocks the host: two allocations and a
    transfer where one kernel on the device would do.

    ## Example
    ```python
    import torch

    for x in loader:
        mask = torch.ones(x.shape[0], x.shape[1]).to(device)
    ```

    ## Use instead
    ```python
    import torch

    for x in loader:
        mask = torch.ones(x.shape[0], x.shape[1], device=device)
    ```

    ## Fix safety
    Safe for deterministic factories (`zeros`, `ones`, `full`, `empty`, `eye`,
    integer `arange`): the values are the same. Unsafe for random factories
    and `linspace`/float `arange`, whose values come from the device's own
    generator or kernels. No fix is offered when the move also changes the
    dtype or the creation pins memory.
    """

    code = "TW206"
    name = "created-then-moved"
    family = "performance"
    severity = Severity.WARNING
    message = "`torch.{name}(...)` is built on the CPU then copied: pass `device=` instead"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        name = factory(ctx, node)
        if name is None or name in {"tensor", "as_tensor"} or passes_device(node):
            return  # building from host data copies it either way
        if is_true(getattr(keyword(node, "requires_grad"), "value", None)):
            return  # TW126: a bug, not just slow
        move = chained_method(ctx, node)
        if move is None or _moved_to(ctx, move) is None:
            return
        function = ctx.function
        hot = bool(ctx.loops) or (
            function is not None and function.in_module_class and function.name != "__init__"
        )
        if not hot:
            return
        fix = None
        device = move_target(ctx, move)
        if device is not None and not keyword(node, "pin_memory"):
            fix = move_into_factory(ctx, node, move, device, _applicability(name, node))
        ctx.report(self, node, fix=fix, name=name)


def _applicability(name: str, node: ast.Call) -> Applicability:
    if name in DEVICE_DEPENDENT:
        return Applicability.UNSAFE
    if name == "arange" and any(
        isinstance(arg, ast.Constant) and isinstance(arg.value, float) for arg in node.args
    ):
        return Applicability.UNSAFE
    return Applicability.SAFE
