"""What the module, performance and checkpoint rules need to know about tensors.

Static review cannot know types, so these helpers answer narrow questions
precisely and say "don't know" (``False``/``None``) otherwise: is this call a
torch tensor factory, does this expression clearly produce a tensor, does this
argument clearly name a device.
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat, keyword
from torchwise.review.rules._util import add_keyword

#: ``torch.<name>`` functions that allocate a new tensor and take ``device=``.
FACTORIES = frozenset(
    {
        "tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace",
        "logspace", "eye", "rand", "randn", "randint", "randperm", "normal", "empty_strided",
        "tril_indices", "triu_indices",
    }
)  # fmt: skip
#: Factories whose values depend on the device's random generator or kernels.
DEVICE_DEPENDENT = frozenset(
    {"rand", "randn", "randint", "randperm", "normal", "linspace", "logspace"}
)

#: Other ``torch.<name>`` functions that return a single tensor.
_TENSOR_FUNCTIONS = FACTORIES | frozenset(
    {
        "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
        "randint_like", "tril", "triu", "cat", "concat", "concatenate", "stack", "from_numpy",
        "exp", "log", "sqrt", "rsqrt", "cos", "sin", "outer", "einsum", "matmul", "diag",
        "flip", "roll", "cumsum", "cumprod", "pow", "clamp", "where", "kron", "block_diag",
        "hann_window", "hamming_window", "blackman_window", "bartlett_window", "polar",
        "frombuffer", "masked_fill", "sigmoid", "tanh", "softmax", "log_softmax", "relu", "abs",
        "mean", "sum", "bmm", "mm", "baddbmm", "addmm", "tensordot", "reshape", "flatten",
        "transpose", "permute", "unsqueeze", "squeeze", "gather", "index_select", "logsumexp",
    }
)  # fmt: skip

_FUNCTIONAL_TUPLES = frozenset(
    {
        "torch.nn.functional.multi_head_attention_forward",
        "torch.nn.functional.max_pool1d_with_indices",
        "torch.nn.functional.max_pool2d_with_indices",
        "torch.nn.functional.max_pool3d_with_indices",
        "torch.nn.functional.adaptive_max_pool1d_with_indices",
        "torch.nn.functional.adaptive_max_pool2d_with_indices",
        "torch.nn.functional.adaptive_max_pool3d_with_indices",
    }
)

#: Tensor methods that return a tensor (so a chain of them stays a tensor).
TENSOR_METHODS = frozenset(
    {
        "view", "reshape", "float", "double", "half", "bfloat16", "long", "int", "bool", "to",
        "cuda", "cpu", "unsqueeze", "squeeze", "expand", "repeat", "t", "transpose", "permute",
        "contiguous", "clone", "detach", "flip", "mul", "add", "sub", "div", "exp", "log",
        "pow", "sqrt", "tril", "triu", "masked_fill", "flatten", "type", "type_as", "fill_",
        "normal_", "uniform_", "zero_", "abs", "neg", "cumsum", "sum", "mean", "softmax",
        "log_softmax", "sigmoid", "tanh", "relu", "matmul", "expand_as", "view_as", "reshape_as",
    }
)  # fmt: skip

#: Methods that move or convert a tensor, producing a new (non-leaf) tensor.
MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "type"})

_DEVICE_NAMES = ("device", "dev")
_DEVICE_STRINGS = ("cuda", "cpu", "mps", "xpu", "meta", "hpu", "npu")


def factory(ctx: Context, call: ast.Call) -> str | None:
    """``"zeros"`` for ``torch.zeros(...)``; None for anything else."""
    qualname = ctx.call_name(call)
    if qualname is None or not qualname.startswith("torch."):
        return None
    name = qualname[6:]
    return name if name in FACTORIES else None


def tensor_function(ctx: Context, call: ast.Call) -> bool:
    """A call to a ``torch.<name>`` function known to return one tensor."""
    qualname = ctx.call_name(call)
    return (
        qualname is not None and qualname.startswith("torch.") and qualname[6:] in _TENSOR_FUNCTIONS
    )


def produces_tensor(ctx: Context, expr: ast.expr) -> bool:
    """Whether ``expr`` clearly evaluates to a tensor built by torch functions:
    ``torch.tensor([...]).view(1, 3, 1, 1)``, ``torch.tril(torch.ones(n, n)) * 2``."""
    while True:
        if isinstance(expr, ast.BinOp):
            return produces_tensor(ctx, expr.left) or produces_tensor(ctx, expr.right)
        if not isinstance(expr, ast.Call):
            return False
        if tensor_function(ctx, expr):
            return True
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS:
            expr = func.value
            continue
        return False


def passes_device(call: ast.Call) -> bool:
    """The call states its device (or may, through ``**kwargs``)."""
    return keyword(call, "device") is not None or has_kwargs_splat(call)


def device_text(ctx: Context, expr: ast.expr) -> str | None:
    """The source of ``expr`` when it clearly names a device, else None.

    Devices: string literals such as ``"cuda:0"``, ``torch.device(...)`` calls,
    and names or attributes called ``device``/``dev``/``*_device``
    (``x.device``, ``self.device``, ``args.device``). ``.to(x)`` with a tensor
    argument also converts the dtype, so plain names are not devices here.
    """
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return ctx.text(expr) if expr.value.split(":")[0] in _DEVICE_STRINGS else None
    if isinstance(expr, ast.Call) and ctx.call_name(expr) == "torch.device":
        return ctx.text(expr)
    name = ctx.dotted(expr)
    if name is None:
        return None
    last = name.rsplit(".", 1)[-1].lower()
    if last in _DEVICE_NAMES or last.endswith("_device"):
        return ctx.text(expr)
    return None


def move_target(ctx: Context, move: ast.Call) -> str | None:
    """The device text for a ``.to(...)``/``.cuda()`` call that only moves, else None.

    ``.to(device)`` and ``.to(device=device)`` (``non_blocking`` is meaningless
    once the tensor is created on the device) give ``device``; ``.cuda()`` gives
    ``"cuda"``; anything that may also change the dtype (``.to(x)``,
    ``.to(device, torch.half)``, ``dtype=``) gives None.
    """
    func = move.func
    if not isinstance(func, ast.Attribute):
        return None
    extra = [k for k in move.keywords if k.arg not in {"device", "non_blocking"}]
    if extra:
        return None
    if func.attr == "cuda":
        return '"cuda"' if not move.args and not move.keywords else None
    if func.attr != "to":
        return None
    device = keyword(move, "device")
    if device is not None:
        return None if move.args else device_text(ctx, device.value)
    if len(move.args) == 1:
        return device_text(ctx, move.args[0])
    return None


#: Methods a freshly built tensor goes through on its way to ``.to(device)``
#: that do not change where it lives: ``torch.FloatTensor(n, k).zero_().to(d)``.
ON_THE_WAY = frozenset(
    {"zero_", "fill_", "unsqueeze", "expand", "expand_as", "view", "reshape", "long", "float",
     "int", "contiguous", "repeat", "t", "normal_", "uniform_"}
)  # fmt: skip
#: The legacy typed constructors, which build on the CPU whatever follows.
LEGACY = frozenset(
    {"FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ByteTensor",
     "BoolTensor", "ShortTensor", "CharTensor"}
)  # fmt: skip


def chained_move(ctx: Context, call: ast.Call) -> tuple[ast.Call, bool] | None:
    """The ``.to(...)``/``.cuda()`` a freshly built ``call`` reaches through
    methods that keep it where it is, and whether it is the very next one."""
    parents = ctx.parents
    index = len(parents) - 1
    direct = True
    while index >= 1 and isinstance(parents[index], ast.Attribute):
        outer = parents[index - 1]
        attribute = parents[index]
        if not (isinstance(outer, ast.Call) and outer.func is attribute):
            return None
        assert isinstance(attribute, ast.Attribute)
        if attribute.attr in {"to", "cuda"}:
            return outer, direct
        if attribute.attr not in ON_THE_WAY:
            return None
        direct = False
        index -= 2
    return None


def chained_method(ctx: Context, call: ast.Call) -> ast.Call | None:
    """For ``call`` in ``call.method(...)``, the outer method call, else None."""
    parents = ctx.parents
    if len(parents) >= 2 and isinstance(parents[-1], ast.Attribute):
        outer = parents[-2]
        if isinstance(outer, ast.Call) and outer.func is parents[-1]:
            return outer
    return None


def move_into_factory(
    ctx: Context, created: ast.Call, move: ast.Call, device: str, applicability: Applicability
) -> Fix:
    """``torch.zeros(n).to(device)`` -> ``torch.zeros(n, device=device)``."""
    insert = add_keyword(ctx, created, f"device={device}")
    drop = Edit(ctx.span(created)[1], ctx.span(move)[1], "")
    return Fix("Create the tensor on the device", (insert, drop), applicability)
