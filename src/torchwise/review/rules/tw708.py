"""TW708 cuda-call-unguarded (tensors).

The class docstring is its user documentation (`torchwise rules TW708`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword, tests_cuda_availability
from torchwise.review.registry import Rule, rule


@rule
class CudaCallUnguarded(Rule):
    """## What it does
    Flags `.cuda()` and `.to("cuda")` outside any `if`, in a file that
    elsewhere chooses its device by whether CUDA is there (`torch.cuda.
    is_available()`, a `--cuda`/`--no-cuda` option, `"cuda" if ... else
    "cpu"`): a file written to run on the CPU too. Also in a file that places
    its other tensors on a device held in a variable (`device=opt.device`)
    when a file that imports it makes that choice.

    ## Why is this bad?
    On a machine without CUDA (a laptop, a CI runner, a CPU node) the line
    raises `AssertionError: Torch not compiled with CUDA enabled` or
    `RuntimeError: No CUDA GPUs are available`, although the rest of the
    script was written to fall back to the CPU. (TW204, off by default, flags
    every hard-coded `.cuda()`.)

    ## Example
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    criterion = nn.MSELoss().cuda()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    criterion = nn.MSELoss().to(device)
    ```
    """

    code = "TW708"
    name = "cuda-call-unguarded"
    family = "tensors"
    severity = Severity.WARNING
    impact = "crash"
    message = (
        "`{call}` runs on every path, but this file falls back to the CPU without CUDA "
        "(line {guard}): it fails there"
    )
    call_methods = frozenset({"cuda", "to"})
    needs_text = ("cuda",)

    def __init__(self) -> None:
        self.guard: int | None = None
        self.calls: list[tuple[ast.Call, str]] = []

    def visit_If(self, node: ast.If, ctx: Context) -> None:
        self._note_guard(node.test, ctx)

    def visit_IfExp(self, node: ast.IfExp, ctx: Context) -> None:
        self._note_guard(node.test, ctx)

    def _note_guard(self, test: ast.expr, ctx: Context) -> None:
        if self.guard is None and tests_cuda_availability(ctx.text(test)):
            self.guard = test.lineno

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or ctx.branch or _in_conditional(ctx):
            return
        if ctx.qualname(func.value) is not None:
            return  # a module's function
        function = ctx.function
        if function is not None and (
            function.name in {"cuda", "to", "_apply"} or "gpu" in function.name.lower()
        ):
            return
        if func.attr == "cuda" and not node.args and not node.keywords:
            self.calls.append((node, ".cuda()"))
        elif func.attr == "to":
            first = node.args[0] if node.args else getattr(keyword(node, "device"), "value", None)
            if isinstance(first, ast.Constant) and str(first.value).startswith("cuda"):
                self.calls.append((node, f'.to("{first.value!s}")'))

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if self.guard is not None:
            for node, call in self.calls:
                ctx.report(self, node, call=call, guard=str(self.guard))
            return
        if not self.calls or not ctx.project.importers_fall_back_to_cpu():
            return
        variable = _device_variable(ctx)
        if variable is None:
            return
        for node, call in self.calls:
            message = (
                f"`{call}` runs on every path, but this file places its other tensors on "
                f"`{variable}`, and the files that import it fall back to the CPU without "
                "CUDA: it fails there"
            )
            ctx.report(self, node, call=call, guard="", message=message)


def _device_variable(ctx: Context) -> str | None:
    """The first device held in a variable that the file places tensors on
    (``device=opt.device``, ``.to(device)``), as written."""
    for node in ctx.module_nodes():
        if not isinstance(node, ast.Call):
            continue
        given = getattr(keyword(node, "device"), "value", None)
        if given is None and isinstance(node.func, ast.Attribute) and node.func.attr == "to":
            given = node.args[0] if node.args else None
        if isinstance(given, (ast.Name, ast.Attribute)) and "device" in ctx.text(given).lower():
            return ctx.text(given)
    return None


def _in_conditional(ctx: Context) -> bool:
    """Inside an ``if``/``IfExp``/``try`` of any kind, or a loop over devices."""
    return any(isinstance(p, (ast.If, ast.IfExp, ast.Try)) for p in ctx.parents)
