"""FLOP formulas: one registry keyed by aten op, pure functions of shapes.

Convention (the one behind every published figure: torchvision's "GFLOPS",
fvcore, ``torch.utils.flop_counter``): only multiply-accumulate work in matrix
products and convolutions is counted, a multiply-add is 2 FLOPs, so MACs =
FLOPs / 2. Element-wise work, normalisation, softmax and pooling are known ops
costing no MACs under this convention (:func:`classify` says so explicitly);
any other op is *unsupported* and reported, never silently counted as zero.

Formulas build on ``torch.utils.flop_counter`` where it is right (matmuls,
grouped convolutions, fused attention kernels) and fill its gaps: the CPU
attention kernels ``_scaled_dot_product_flash_attention_for_cpu`` (and its
backward), and the fused ``nn.TransformerEncoderLayer`` / ``nn.MultiheadAttention``
inference ops ``_transformer_encoder_layer_fwd`` and ``_native_multi_head_attention``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from math import prod
from typing import Any

import torch
import torch.utils.flop_counter as fc

aten = torch.ops.aten
Shape = tuple[int, ...]
Formula = Callable[..., int]

#: aten op packet -> formula(*args, out_shape=..., **kwargs) with tensors replaced by shapes.
FORMULAS: dict[Any, Formula] = {}


def register(*ops: Any) -> Callable[[Formula], Formula]:
    """Register ``formula`` for each aten op packet (``aten.mm``, not ``aten.mm.default``)."""

    def decorator(formula: Formula) -> Formula:
        for op in ops:
            if op in FORMULAS:
                raise RuntimeError(f"duplicate FLOP formula for {op}")
            FORMULAS[op] = formula
        return formula

    return decorator


@register(aten.mm)
def mm_flop(a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    # (m, k) @ (k, n): m*n dot products of length k
    (m, k), (_k, n) = a, b
    return 2 * m * k * n


@register(aten.addmm, aten._addmm_activation)
def addmm_flop(_bias: Shape, a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    return mm_flop(a, b)  # bias add is element-wise: not a MAC


@register(aten.bmm)
def bmm_flop(a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    # (B, m, k) @ (B, k, n)
    (batch, m, k), (_b, _k, n) = a, b
    return 2 * batch * m * k * n


@register(aten.baddbmm)
def baddbmm_flop(_bias: Shape, a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    return bmm_flop(a, b)


@register(aten.addbmm)
def addbmm_flop(_bias: Shape, a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    return bmm_flop(a, b)  # sum over the batch of (m, k) @ (k, n)


@register(aten.mv, aten.addmv)
def mv_flop(*args: Any, **__: Any) -> int:
    # mv(A, v) or addmv(bias, A, v): A is (m, k)
    m, k = args[1] if len(args) >= 3 else args[0]
    return 2 * int(m) * int(k)


@register(aten.dot, aten.vdot)
def dot_flop(a: Shape, _b: Shape, *_: Any, **__: Any) -> int:
    return 2 * a[0]


@register(
    aten.convolution,
    aten._convolution,
    aten.cudnn_convolution,
    aten.mkldnn_convolution,
    aten._slow_conv2d_forward,
    aten.convolution_overrideable,
)
def conv_flop(x: Shape, w: Shape, *args: Any, out_shape: Shape, **__: Any) -> int:
    # out positions x c_out x (c_in / groups) x kernel, per sample: the weight's
    # second dim is already c_in / groups, so grouped and depthwise convs are right.
    transposed = bool(args[4]) if len(args) > 4 and isinstance(args[4], bool) else False
    return int(fc.conv_flop_count(list(x), list(w), list(out_shape), transposed=transposed))


@register(aten.convolution_backward)
def conv_backward_flop(*args: Any, out_shape: Any, **kwargs: Any) -> int:
    # flop_counter's formula is right here (grad input + grad weight, as output_mask asks);
    # its shape wrapper takes the output as out_val and passes shapes through unchanged.
    return int(fc.conv_backward_flop(*args, out_val=out_shape, **kwargs))


@register(
    aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_flash_attention,
    aten._scaled_dot_product_cudnn_attention,
    aten._scaled_dot_product_flash_attention_for_cpu,  # flop_counter misses this: 0 on CPU
    aten._scaled_dot_product_fused_attention_overrideable,
)
def sdpa_flop(q: Shape, k: Shape, v: Shape, *_: Any, **__: Any) -> int:
    # QK^T: (B*h, Tq, d) @ (B*h, d, Tk) and PV: (B*h, Tq, Tk) @ (B*h, Tk, dv). A causal
    # mask is not discounted (the convention of published figures and flop_counter).
    return int(fc.sdpa_flop_count(tuple(q), tuple(k), tuple(v)))  # type: ignore[no-untyped-call]


@register(
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    aten._scaled_dot_product_fused_attention_overrideable_backward,
)
def sdpa_backward_flop(grad_out: Shape, q: Shape, k: Shape, v: Shape, *_: Any, **__: Any) -> int:
    flop = fc.sdpa_backward_flop_count(  # type: ignore[no-untyped-call]
        tuple(grad_out), tuple(q), tuple(k), tuple(v)
    )
    return int(flop)


def _attention_block_flop(batch: int, tq: int, tk: int, dim: int) -> int:
    # in-projections: q over Tq tokens, k and v over Tk tokens, each (dim x dim)
    proj = 2 * batch * tq * dim * dim + 2 * 2 * batch * tk * dim * dim
    # QK^T and PV summed over heads: 2 x (B, Tq, Tk, dim) MACs
    attn = 2 * 2 * batch * tq * tk * dim
    out = 2 * batch * tq * dim * dim  # out-projection
    return proj + attn + out


@register(aten._native_multi_head_attention)
def native_mha_flop(q: Shape, k: Shape, _v: Shape, embed_dim: int, *_: Any, **__: Any) -> int:
    # nn.MultiheadAttention's fused inference path: query (B, Tq, D), key (B, Tk, D)
    batch, tq = (q[0], q[1]) if len(q) == 3 else (1, q[0])
    tk = k[1] if len(k) == 3 else k[0]
    return _attention_block_flop(batch, tq, tk, embed_dim)


@register(aten._transformer_encoder_layer_fwd)
def encoder_layer_flop(src: Shape, embed_dim: int, *args: Any, **__: Any) -> int:
    # nn.TransformerEncoderLayer's fused inference path on src (B, T, D): self-attention
    # plus the two feed-forward matmuls. args follow embed_dim: num_heads, qkv_weight,
    # qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps, 4 norm tensors, then
    # ffn_weight_1 (F, D) at index 12.
    batch, seq = (src[0], src[1]) if len(src) == 3 else (1, src[0])
    ffn_dim = int(args[12][0])
    ffn = 2 * 2 * batch * seq * embed_dim * ffn_dim
    return _attention_block_flop(batch, seq, seq, embed_dim) + ffn


# Ops that do no multiply-accumulate work under the convention above. Pointwise,
# reduction and view ops are recognised by their aten tags; these are the rest.
_NO_MAC = re.compile(
    r"(norm|softmax|pool|dropout|bernoulli|embedding|upsample|pad|_to_copy|copy|clone|cat|stack"
    r"|split|chunk|unbind|select|slice|index|gather|scatter|where|masked|fill|zero|empty|ones"
    r"|full|arange|rand|normal|uniform|tril|triu|repeat|expand|view|reshape|transpose|permute"
    r"|squeeze|unfold|flip|roll|sort|topk|argmax|argmin|max|min|cumsum|detach|alias|lift|t$"
    r"|_local_scalar_dense|nonzero|unique|one_hot|im2col|col2im|contiguous|_backward$"
    r"|threshold|sym_|scalar_tensor|as_strided|new_|resize|set_|_unsafe|item|equal|isin|bucketize)"
)
#: Backward ops that do multiply-accumulate work and therefore need a formula.
_MAC_BACKWARDS = re.compile(r"(conv|attention|mm|linear|matmul|einsum|rnn|lstm|gru)")


def classify(func: Any) -> str:
    """``"counted"`` (has a formula), ``"no-mac"`` (known, 0 MACs) or ``"unsupported"``."""
    packet = getattr(func, "overloadpacket", func)
    if packet in FORMULAS:
        return "counted"
    if getattr(func, "namespace", "aten") == "prim":
        return "no-mac"  # metadata queries (prim.device, prim.layout) under fake tensors
    tags = getattr(func, "tags", ())
    if (
        torch.Tag.pointwise in tags
        or torch.Tag.reduction in tags
        or getattr(func, "is_view", False)
    ):
        return "no-mac"
    name = getattr(packet, "__name__", str(packet))
    if name.endswith("_backward") and _MAC_BACKWARDS.search(name):
        return "unsupported"
    return "no-mac" if _NO_MAC.search(name) else "unsupported"


def _shape_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return type(value)(_shape_of(v) for v in value)
    return value


def count(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """FLOPs of one call of ``func``; callers check :func:`classify` first."""
    formula = FORMULAS[func.overloadpacket]
    shapes = _shape_of(args)
    kw = {k: _shape_of(v) for k, v in kwargs.items()}
    return int(formula(*shapes, out_shape=_shape_of(out), **kw))


def elements(shape: Shape) -> int:
    """Number of elements of ``shape`` (1 for a scalar)."""
    return int(prod(shape))
