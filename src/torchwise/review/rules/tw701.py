"""TW701 device-mismatch (tensors).

The class docstring is its user documentation (`torchwise rules TW701`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.tensors import ACCEL, TensorInfo, mixes_devices
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._devices import (
    LOSS_FUNCTIONS,
    MULTI_TENSOR_METHODS,
    accepts_inputs_anywhere,
    describe,
    operand_infos,
)
from torchwise.review.rules._devices import MULTI_TENSOR as TORCH_MULTI


@rule
class DeviceMismatch(Rule):
    """## What it does
    Flags an operation whose tensors are on different devices on the GPU path:
    one known to be on the CPU (created by a factory without `device=`, a
    batch of a `DataLoader` whose dataset yields CPU tensors, moved with
    `.cpu()`, returned by a project function that builds it on the CPU, a
    plain tensor attribute of a module, which `.to()` does not move) and one
    known to be on the device the script moves its model to (`.to(device)`,
    `.cuda()`, the output of a model that was moved, an input of the
    `forward` of a module the project moves). Checked in arithmetic and
    comparisons, `torch.cat`/`stack`/`where`/`matmul` and friends, losses,
    calls of a model that was moved, and indexing a CPU tensor with a
    device tensor. A 0-dim CPU tensor is fine (PyTorch treats it as a number),
    and so is indexing a device tensor with CPU indices.

    ## Why is this bad?
    It runs on a laptop, where "the device" is the CPU, and crashes on the
    first GPU node with `RuntimeError: Expected all tensors to be on the same
    device, but found at least two devices, cuda:0 and cpu!`, often hours into
    a queued job.

    ## Example
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10)).to(device)
    data = datasets.MNIST("data", download=True, transform=transforms.ToTensor())
    for images, labels in DataLoader(data, batch_size=64, shuffle=True):
        logits = model(images.to(device))
        loss = nn.functional.cross_entropy(logits, labels)
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10)).to(device)
    data = datasets.MNIST("data", download=True, transform=transforms.ToTensor())
    for images, labels in DataLoader(data, batch_size=64, shuffle=True):
        images, labels = images.to(device), labels.to(device)
        loss = nn.functional.cross_entropy(model(images), labels)
    ```
    """

    code = "TW701"
    name = "device-mismatch"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = (
        "{cpu} is on the CPU ({cpu_why}) but {other} is on the device ({other_why}): "
        "this fails on a GPU"
    )

    def __init__(self) -> None:
        self.reported: set[int] = set()  # lines already reported (one finding a line)

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> None:
        self._check(node, [node.left, node.right], ctx)

    def visit_Compare(self, node: ast.Compare, ctx: Context) -> None:
        if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            return  # identity and membership: Python's, not a tensor op
        self._check(node, [node.left, *node.comparators], ctx)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        self._check(node, [node.target, node.value], ctx)

    def visit_Subscript(self, node: ast.Subscript, ctx: Context) -> None:
        """``cpu_tensor[device_index]``: the index must be on the CPU or on the
        indexed tensor's device."""
        base = ctx.tensor_of(node.value)
        if base is None or base.device != "cpu" or not base.nonscalar:
            return
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for index in indices:
            info = ctx.tensor_of(index)
            if info is not None and info.device == ACCEL and info.nonscalar:
                self._report(node, (node.value, base), (index, info), ctx)
                return

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        func = node.func
        if qualname is not None and qualname.startswith("torch."):
            name = qualname.rsplit(".", 1)[-1]
            if qualname == f"torch.{name}" and name in TORCH_MULTI:
                self._check(node, _flattened(node.args), ctx)
                return
            if qualname in LOSS_FUNCTIONS:
                self._check(node, node.args[:2], ctx)
                return
        if isinstance(func, ast.Attribute) and func.attr in MULTI_TENSOR_METHODS:
            receiver = ctx.value_of(func.value)
            if receiver is not None and receiver.kind in (F.TENSOR, F.OUTPUT, F.LOSS):
                self._check(node, [func.value, *node.args], ctx)
                return
        callee = ctx.value_of(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if callee is None:
            return
        if callee.kind == F.LOSS_FN:
            self._check(node, node.args[:2], ctx)
        elif callee.kind == F.MODULE and callee.tensor is not None:
            self._model_call(node, func, callee.tensor, ctx)

    def _model_call(self, node: ast.Call, func: ast.expr, model: TensorInfo, ctx: Context) -> None:
        """``model(x)`` with the model on the device and ``x`` on the CPU."""
        if model.device != ACCEL:
            return
        callee = ctx.value_of(func)
        if callee is None or accepts_inputs_anywhere(callee, ctx):
            return
        arguments = [*node.args, *(item.value for item in node.keywords)]
        for argument, info in operand_infos(arguments, ctx):
            if info.device == "cpu" and info.nonscalar:
                self._report(node, (argument, info), (func, model), ctx, model=True)
                return

    def _check(self, node: ast.AST, operands: list[ast.expr], ctx: Context) -> None:
        found = operand_infos(operands, ctx)
        mixed = mixes_devices([info for _, info in found])
        if mixed is None:
            return
        cpu, other = mixed
        cpu_node = next(expr for expr, info in found if info is cpu)
        other_node = next(expr for expr, info in found if info is other)
        self._report(node, (cpu_node, cpu), (other_node, other), ctx)

    def _report(
        self,
        node: ast.AST,
        cpu: tuple[ast.expr, TensorInfo],
        other: tuple[ast.expr, TensorInfo],
        ctx: Context,
        model: bool = False,
    ) -> None:
        line = getattr(node, "lineno", 0)
        if line in self.reported:
            return
        self.reported.add(line)
        cpu_text, cpu_why = describe(cpu[0], cpu[1], ctx)
        other_text, other_why = describe(other[0], other[1], ctx, model=model)
        ctx.report(self, node, cpu=cpu_text, cpu_why=cpu_why, other=other_text, other_why=other_why)


def _flattened(args: list[ast.expr]) -> list[ast.expr]:
    """``torch.cat([a, b])`` and ``torch.where(c, a, b)`` alike: every tensor operand."""
    flat: list[ast.expr] = []
    for arg in args:
        if isinstance(arg, (ast.List, ast.Tuple)):
            flat.extend(arg.elts)
        else:
            flat.append(arg)
    return flat
