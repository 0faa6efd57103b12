"""TW206 created-then-moved (performance).

The class docstring is its user documentation (`torchwise rules TW206`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_true, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._performance import applicability, moved_to
from torchwise.review.rules._tensors import (
    LEGACY,
    chained_move,
    factory,
    move_into_factory,
    move_target,
    passes_device,
)
from torchwise.review.rules._util import in_test_code


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
    severity = Severity.INFO
    impact = "performance"
    message = "`torch.{name}(...)` is built on the CPU then copied: pass `device=` instead"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        name = factory(ctx, node) or _legacy(ctx, node)
        if name is None or name in {"tensor", "as_tensor"} or passes_device(node):
            return  # building from host data copies it either way
        if is_true(getattr(keyword(node, "requires_grad"), "value", None)):
            return  # TW126: a bug, not just slow
        if keyword(node, "generator") is not None or in_test_code(ctx):
            return  # drawn on the CPU's generator on purpose (same numbers on any device); tests
        chained = chained_move(ctx, node)
        if chained is None or moved_to(ctx, chained[0]) is None:
            return
        move, direct = chained
        function = ctx.function
        hot = bool(ctx.loops) or (
            function is not None and function.in_module_class and function.name != "__init__"
        )
        if not hot:
            return
        fix = None
        device = move_target(ctx, move)
        if device is not None and direct and name not in LEGACY and not keyword(node, "pin_memory"):
            fix = move_into_factory(ctx, node, move, device, applicability(name, node))
        ctx.report(self, node, fix=fix, name=name)


def _legacy(ctx: Context, node: ast.Call) -> str | None:
    """``torch.FloatTensor(n, k)`` and ``torch.LongTensor(range(n))``: built on
    the CPU (from sizes, or a range that `arange` makes on the device)."""
    qualname = ctx.call_name(node) or ""
    name = qualname[6:] if qualname.startswith("torch.") else ""
    if name not in LEGACY or not node.args:
        return None
    first = node.args[0]
    if (
        isinstance(first, ast.Call)
        and isinstance(first.func, ast.Name)
        and first.func.id == "range"
    ):
        return name
    if len(node.args) == 1:  # one argument is data unless it is known to be a size
        return name if ctx.is_size(first) or _named_like_a_size(first) else None
    return name if all(_size_like(arg, ctx) for arg in node.args) else None


def _size_like(arg: ast.expr, ctx: Context) -> bool:
    """A size, not data: an int, or a name or attribute that holds no list,
    array or tensor as far as the code shows (``self.num_classes``). Only
    said of one of several arguments: legacy constructors take one datum."""
    if ctx.is_size(arg):
        return True
    if not isinstance(arg, (ast.Name, ast.Attribute)):
        return False
    value = ctx.value_of(arg)
    return value is None or (value.kind is None and value.tensor is None)


def _named_like_a_size(arg: ast.expr) -> bool:
    """``n``, ``num_classes``, ``batch_size``, ``self.hidden_dim``..."""
    name = arg.attr if isinstance(arg, ast.Attribute) else getattr(arg, "id", "")
    lowered = name.lower()
    return (
        lowered in {"n", "k", "b", "d"}
        or lowered.startswith(("n_", "num", "len"))
        or (lowered.endswith(("size", "dim", "len", "count", "length")))
    )
