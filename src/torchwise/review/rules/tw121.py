"""TW121 tensor-attribute-not-buffer (modules).

The class docstring is its user documentation (`torchwise rules TW121`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._modules import module_method, self_attribute
from torchwise.review.rules._tensors import (
    produces_tensor,
)
from torchwise.review.rules._util import in_test_code, replace_fix

_MOVES = frozenset({"to", "cuda", "cpu", "type_as"})


@rule
class TensorAttribute(Rule):
    """## What it does
    Flags a tensor built in an `nn.Module`'s `__init__` and stored as a plain
    attribute (`self.mean = torch.tensor([...])`) instead of a buffer or a
    parameter.

    A warning where the project moves the module to a device (then the
    tensor stays behind); a hint (`info`) where nothing moves it.

    ## Why is this bad?
    Plain tensor attributes are not moved by `model.to(device)`/`.cuda()`/
    `.half()`, and are missing from `state_dict()`. The module works on the
    CPU and fails with a device-mismatch error (or silently computes in the
    wrong dtype) as soon as it is moved.

    ## Example
    ```python
    import torch
    from torch import nn

    class Normalize(nn.Module):
        def __init__(self):
            super().__init__()
            self.mean = torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1)
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    class Normalize(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1))
    ```

    ## Fix safety
    Unsafe: the fix registers a non-persistent buffer
    (`persistent=False`, so `state_dict()` keys do not change), which makes the
    tensor follow `.to()`; code that later assigns a non-tensor to the same
    attribute would then raise, and a trainable value wants `nn.Parameter`.
    """

    code = "TW121"
    name = "tensor-attribute-not-buffer"
    family = "modules"
    severity = Severity.WARNING
    impact = "crash"
    message = "tensor `self.{attr}` is not a buffer: `.to()` and `state_dict()` ignore it"
    fix = Applicability.UNSAFE

    call_methods = _MOVES

    def __init__(self) -> None:
        # (class, attribute) -> the __init__ assignment and its fix
        self.candidates: dict[tuple[str, str], tuple[ast.Assign, Fix | None]] = {}
        self.reassigned: set[tuple[str, str]] = set()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        function = ctx.function
        cls = module_method(ctx)
        if function is None or cls is None or len(node.targets) != 1:
            return
        attr = self_attribute(node.targets[0])
        if attr is None:
            return
        if function.name != "__init__":
            # Re-assigned by hand (`self.grid = make_grid(x).to(x.device)`): the
            # module manages where it lives itself.
            self.reassigned.add((cls.name, attr))
            return
        if attr in _FRAMEWORK_ATTRIBUTES or in_test_code(ctx):
            return
        if not produces_tensor(ctx, node.value):
            return
        text = f'self.register_buffer("{attr}", {ctx.text(node.value)}, persistent=False)'
        fix = replace_fix(
            ctx, node, text, "Register it as a non-persistent buffer", Applicability.UNSAFE
        )
        self.candidates[(cls.name, attr)] = (node, fix)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        # `self.freqs.to(x.device)` in a method: the module moves it by hand, on
        # purpose (kept out of `.half()` casts, or derived and not worth saving).
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in _MOVES):
            return
        function = ctx.function
        cls = module_method(ctx)
        attr = self_attribute(func.value)
        if function is None or cls is None or attr is None or function.name == "__init__":
            return
        self.reassigned.add((cls.name, attr))

    def leave_module(self, module: object, ctx: Context) -> None:
        for (cls, attr), (node, fix) in self.candidates.items():
            if (cls, attr) in self.reassigned:
                continue
            moved = ctx.project.placement(ctx.project.own(cls)) is not None
            # Never moved to a device (a CPU-only script): a hint until it is.
            ctx.report(self, node, fix=fix, attr=attr, severity=None if moved else Severity.INFO)


#: Calls that put a tensor on a device (and dtype) by hand.

#: Plain tensors a framework reads by name: Lightning's example input.
_FRAMEWORK_ATTRIBUTES = frozenset({"example_input_array"})
