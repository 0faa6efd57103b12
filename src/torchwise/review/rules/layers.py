"""nn.Module definitions (TW12x-TW14x), continued: how layers are combined
and created (a bias BatchNorm cancels, layers built inside ``forward``,
functional dropout that ignores ``self.training``)."""

from __future__ import annotations

import ast
import itertools

from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import (
    add_keyword,
    has_kwargs_splat,
    keyword,
    set_keyword,
)
from torchwise.review.rules.modules import creates_module, module_method, self_attribute

_CONVS = {f"torch.nn.Conv{n}d" for n in (1, 2, 3)}
_NORMS = {f"torch.nn.BatchNorm{n}d" for n in (1, 2, 3)} | {
    "torch.nn.SyncBatchNorm",
    *(f"torch.nn.LazyBatchNorm{n}d" for n in (1, 2, 3)),
}


def _conv_with_bias(ctx: Context, expr: ast.AST) -> ast.Call | None:
    """``expr`` when it is ``nn.ConvNd(...)`` whose bias is on (the default)."""
    if not isinstance(expr, ast.Call) or ctx.call_name(expr) not in _CONVS:
        return None
    bias = keyword(expr, "bias")
    if bias is not None:
        return expr if isinstance(bias.value, ast.Constant) and bias.value.value is True else None
    if len(expr.args) >= 8 or any(isinstance(a, ast.Starred) for a in expr.args):
        return None  # bias given positionally, or maybe
    if any(item.arg is None for item in expr.keywords):
        return None  # **kwargs may turn it off
    return expr


def _is_norm(ctx: Context, expr: ast.AST) -> bool:
    return isinstance(expr, ast.Call) and ctx.call_name(expr) in _NORMS


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
    severity = Severity.WARNING
    message = "convolution bias is cancelled by the BatchNorm that follows: pass `bias=False`"
    fix = Applicability.UNSAFE

    def __init__(self) -> None:
        self.convs: dict[tuple[str, str], ast.Call] = {}  # (class, attr) -> nn.Conv2d(...)
        self.norms: set[tuple[str, str]] = set()
        self.conv_outputs: dict[str, str] = {}  # local name -> conv attr that produced it
        self.reported: set[int] = set()

    def _sequence(self, ctx: Context, items: list[ast.expr]) -> None:
        for first, second in itertools.pairwise(items):
            conv = _conv_with_bias(ctx, first)
            if conv is not None and _is_norm(ctx, second):
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
            conv = _conv_with_bias(ctx, value)
            if conv is not None:
                self.convs[key] = conv
            elif _is_norm(ctx, value):
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


_FUNCTIONAL_DROPOUT = {
    f"torch.nn.functional.{name}"
    for name in (
        "dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "alpha_dropout",
        "feature_alpha_dropout",
    )
}


@rule
class FunctionalDropoutTraining(Rule):
    """## What it does
    Flags `F.dropout(...)` (and `dropout1d/2d/3d`, `alpha_dropout`,
    `feature_alpha_dropout`) in a method of an `nn.Module` without a
    `training=` argument, outside an `if self.training:` guard.

    ## Why is this bad?
    Unlike `nn.Dropout`, the functional form does not know the module's mode:
    `training` defaults to `True`, so dropout stays on after `model.eval()`
    and evaluation results are random and worse.

    ## Example
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def forward(self, x):
            return F.dropout(self.proj(x), p=0.1)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def forward(self, x):
            return F.dropout(self.proj(x), p=0.1, training=self.training)
    ```

    ## Fix safety
    Unsafe: it turns dropout off in eval mode, which changes evaluation
    outputs (to the ones you meant).
    """

    code = "TW133"
    name = "functional-dropout-always-on"
    family = "modules"
    severity = Severity.ERROR
    message = "`{func}` without `training=self.training` stays on in eval mode"
    fix = Applicability.UNSAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in _FUNCTIONAL_DROPOUT or not ctx.in_module_class:
            return
        if keyword(node, "training") or has_kwargs_splat(node) or len(node.args) >= 3:
            return
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            return
        for parent in ctx.parents:  # `if self.training:` / `... if self.training else x`
            if isinstance(parent, (ast.If, ast.IfExp)) and "training" in ctx.text(parent.test):
                return
        function = ctx.function
        first = function.node.args.args[0].arg if function and function.node.args.args else ""  # type: ignore[attr-defined]
        fix = None
        if first == "self":
            edit = add_keyword(ctx, node, "training=self.training")
            fix = Fix("Pass `training=self.training`", (edit,), Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, func="F." + qualname.rsplit(".", 1)[-1])


_PARAMETRIZED_LAYERS = {
    f"torch.nn.{name}"
    for name in (
        "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
        "ConvTranspose3d", "Embedding", "EmbeddingBag", "BatchNorm1d", "BatchNorm2d",
        "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "LSTM", "GRU", "RNN", "LSTMCell",
        "GRUCell", "RNNCell", "MultiheadAttention", "PReLU", "Transformer",
        "TransformerEncoderLayer", "TransformerDecoderLayer",
    )
}  # fmt: skip


@rule
class LayerCreatedInForward(Rule):
    """## What it does
    Flags an `nn.Parameter` or a layer with weights (`nn.Linear`, `nn.Conv2d`,
    `nn.LayerNorm`, ...) constructed inside `forward`, outside an `if` (the
    lazy-initialisation pattern) and not stored on `self`.

    ## Why is this bad?
    A layer built in `forward` gets fresh random weights on every call, and
    neither it nor a parameter made there is in `model.parameters()` when the
    optimizer is built: the output is noise and nothing learns.

    ## Example
    ```python
    from torch import nn

    class Head(nn.Module):
        def forward(self, x):
            return nn.Linear(x.shape[-1], 10)(x)
    ```

    ## Use instead
    ```python
    from torch import nn

    class Head(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, 10)

        def forward(self, x):
            return self.proj(x)
    ```
    """

    code = "TW136"
    name = "layer-created-in-forward"
    family = "modules"
    severity = Severity.ERROR
    message = "`{layer}` created in `forward` is re-initialised every call and never trained"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not ctx.in_forward:
            return
        qualname = ctx.call_name(node)
        kind = creates_module(ctx, node)
        if kind != "parameter" and qualname not in _PARAMETRIZED_LAYERS:
            return
        parents = ctx.parents
        if any(isinstance(parent, (ast.If, ast.IfExp, ast.Try)) for parent in parents):
            return  # lazy initialisation: `if self.proj is None: self.proj = nn.Linear(...)`
        statement = parents[-1] if parents else None
        if isinstance(statement, ast.Assign) and any(
            self_attribute(target) for target in statement.targets
        ):
            return
        ctx.report(self, node, layer="nn." + (qualname or "").rsplit(".", 1)[-1])
