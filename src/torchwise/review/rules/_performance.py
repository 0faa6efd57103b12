"""Performance (TW2xx): code that is correct but makes the GPU wait.

Most of these matter only where code runs every step (a training loop, a
module's ``forward``), so they report there and stay quiet in one-off setup.
The opinionated ones (syncs, DataParallel, hard-coded ``.cuda()``) are INFO
rules, off by default: ``--extend-select TW202`` turns one on.
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context, kind_from_callee
from torchwise.review.engine.syntax import keyword
from torchwise.review.rules._tensors import (
    DEVICE_DEPENDENT,
    device_text,
)

DATALOADERS = {"torch.utils.data.DataLoader"}
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


def guarded(ctx: Context) -> bool:
    """The current node sits under an ``if`` inside the innermost loop."""
    for parent in reversed(ctx.parents):
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)):
            return False
        if isinstance(parent, (ast.If, ast.IfExp)):
            return True
    return False


def in_memory(ctx: Context, dataset: ast.expr) -> bool:
    """A ``TensorDataset`` or a synthetic one (``RandomDataset(...)``,
    ``self.fake_train``): batches are slices of memory, workers would not help."""
    if isinstance(dataset, ast.Call):
        if ctx.call_name(dataset) in _IN_MEMORY:
            return True
        dataset = dataset.func
    name = (ctx.dotted(dataset) or "").rsplit(".", 1)[-1].lower()
    return any(word in name for word in _SYNTHETIC)


SYNCS = {"item", "cpu", "numpy", "tolist"}


DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel"}


def cuda_guarded(ctx: Context) -> bool:
    """Inside ``if torch.cuda.is_available():`` or ``... if cuda_ok else ...``."""
    for parent in ctx.parents:
        if isinstance(parent, (ast.If, ast.IfExp)) and "cuda" in ctx.text(parent.test):
            return True
    return False


def moved_to(ctx: Context, move: ast.Call) -> str | None:
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


def applicability(name: str, node: ast.Call) -> Applicability:
    if name in DEVICE_DEPENDENT:
        return Applicability.UNSAFE
    if name == "arange" and any(
        isinstance(arg, ast.Constant) and isinstance(arg.value, float) for arg in node.args
    ):
        return Applicability.UNSAFE
    return Applicability.SAFE
