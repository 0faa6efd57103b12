"""TW134 conv-bias-before-batchnorm (modules).

The class docstring is its user documentation (`torchwise rules TW134`).
"""

from __future__ import annotations

import ast
import itertools

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._layers import conv_with_bias, is_norm
from torchwise.review.rules._modules import module_method, self_attribute
from torchwise.review.rules._util import set_keyword


@rule
class ConvBiasBeforeBatchNorm(Rule):
    """## What it does
    Flags an `nn.Conv1d/2d/3d` with its bias on (the default) whose output goes
    straight into a BatchNorm: adjacent in `nn.Sequential(...)` or a layer
    list, or applied as `self.bn(self.conv(x))` / `x = self.conv(x); x =
    self.bn(x)` in a module.

    ## Why is this bad?
    BatchNorm subtracts the per-channel mean right away, so a constant
    per-channel bias is cancelled exactly: it gets zero gradient, costs memory
    and an extra add, and clutters the state dict. This is waste, not a wrong
    result; keep it (with `# noqa: TW134`) only to stay compatible with
    pretrained checkpoints that have the bias.

    ## Example
    ```python
    from torch import nn

    block = nn.Sequential(nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU())
    ```

    ## Use instead
    ```python
    from torch import nn

    block = nn.Sequential(
        nn.Conv2d(64, 128, 3, padding=1, bias=False), nn.BatchNorm2d(128), nn.ReLU()
    )
    ```

    ## Fix safety
    Unsafe: `bias=False` removes the `.bias` entries from the state dict, so
    existing checkpoints no longer load with `strict=True`.
    """

    code = "TW134"
    name = "conv-bias-before-batchnorm"
    family = "modules"
    severity = Severity.INFO
    default_enabled = False
    message = "convolution bias is cancelled by the BatchNorm that follows: pass `bias=False`"
    fix = Applicability.UNSAFE

    def __init__(self) -> None:
        self.convs: dict[tuple[str, str], ast.Call] = {}  # (class, attr) -> nn.Conv2d(...)
        self.norms: set[tuple[str, str]] = set()
        self.conv_outputs: dict[str, str] = {}  # local name -> conv attr that produced it
        self.reported: set[int] = set()

    def _sequence(self, ctx: Context, items: list[ast.expr]) -> None:
        for first, second in itertools.pairwise(items):
            conv = conv_with_bias(ctx, first)
            if conv is not None and is_norm(ctx, second):
                self._report(ctx, conv)

    def visit_List(self, node: ast.List, ctx: Context) -> None:
        self._sequence(ctx, node.elts)

    def visit_Tuple(self, node: ast.Tuple, ctx: Context) -> None:
        self._sequence(ctx, node.elts)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if len(node.args) >= 2 and ctx.call_name(node) == "torch.nn.Sequential":
            self._sequence(ctx, node.args)
        # self.bn(self.conv(x)) in a module method
        cls = module_method(ctx)
        if cls is None or len(node.args) != 1:
            return
        norm = self_attribute(node.func)
        inner = node.args[0]
        if norm is None or not isinstance(inner, ast.Call):
            return
        conv = self_attribute(inner.func)
        if conv is not None:
            self._pair(ctx, cls.name, conv, norm)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        cls = module_method(ctx)
        if cls is None or len(node.targets) != 1:
            return
        target, value = node.targets[0], node.value
        attr = self_attribute(target)
        if attr is not None:
            key = (cls.name, attr)
            self.norms.discard(key)
            self.convs.pop(key, None)
            conv = conv_with_bias(ctx, value)
            if conv is not None:
                self.convs[key] = conv
            elif is_norm(ctx, value):
                self.norms.add(key)
            return
        if not isinstance(target, ast.Name):
            return
        # x = self.conv(x) ... x = self.bn(x): the name carries the conv output.
        if isinstance(value, ast.Call) and len(value.args) == 1:
            called = self_attribute(value.func)
            source = value.args[0]
            if called is not None and isinstance(source, ast.Name):
                produced_by = self.conv_outputs.get(source.id)
                if produced_by is not None:
                    self._pair(ctx, cls.name, produced_by, called)
                self.conv_outputs.pop(target.id, None)
                if (cls.name, called) in self.convs:
                    self.conv_outputs[target.id] = called
                return
        self.conv_outputs.pop(target.id, None)

    def leave_function(self, function: object, ctx: Context) -> None:
        self.conv_outputs.clear()

    def _pair(self, ctx: Context, cls: str, conv: str, norm: str) -> None:
        call = self.convs.get((cls, conv))
        if call is not None and (cls, norm) in self.norms:
            self._report(ctx, call)

    def _report(self, ctx: Context, conv: ast.Call) -> None:
        if id(conv) in self.reported:
            return
        self.reported.add(id(conv))
        edit = set_keyword(ctx, conv, "bias", "False")
        fix = Fix("Pass `bias=False`", (edit,), Applicability.UNSAFE)
        ctx.report(self, conv, fix=fix)
