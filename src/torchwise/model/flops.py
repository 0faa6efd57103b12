"""FLOP formulas: one registry keyed by aten op, pure functions of shapes.

Convention (the one behind published figures: torchvision's "GFLOPS",
``torch.utils.flop_counter``): only multiply-accumulate work in matrix products
and convolutions is counted, a multiply-add is 2 FLOPs, so MACs = FLOPs / 2.
Element-wise work, normalisation, softmax, pooling and indexing cost no MACs;
pointwise, reduction and view ops are recognised by their aten tags, every
other such op is listed by name in :data:`~torchwise.model.zero_cost.NO_MAC_OPS`
(an explicit table: a new op is reported, never guessed), and any op in neither is *unsupported* and
reported, never silently counted as zero.

**Attention.** Every count is split into products with a weight and products
of two activations, which in practice are attention's ``QK^T`` and ``PV``
(whether written as ``q @ k.transpose(-2, -1)``, ``einsum`` or
``F.scaled_dot_product_attention``). The SDPA kernels are attention by op
(:data:`ATTENTION_OPS`), fused attention blocks carry a formula for their
attention part (:data:`ATTENTION_PARTS`), and a generic product is attention
when both operands were computed from the forward's inputs, which the caller
decides (:func:`count` takes the predicate). The *full* convention (default)
counts both; *no-attention* leaves attention out, which is what fvcore,
ptflops, torchinfo and ``FlopCounterMode`` report on the CPU for a model that
calls ``F.scaled_dot_product_attention``, what timm's model cards list, and
what the "2 FLOPs per parameter per token" rule assumes.

Formulas build on ``torch.utils.flop_counter`` where it is right (matmuls,
grouped convolutions, fused attention kernels) and fill its gaps: the CPU
attention kernels ``_scaled_dot_product_flash_attention_for_cpu`` (and its
backward), the fused ``nn.TransformerEncoderLayer`` / ``nn.MultiheadAttention``
inference ops, ``mkldnn_rnn_layer`` (``nn.LSTM`` on the CPU), grouped and
weight-only-quantised matmuls.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

import torch
import torch.utils.flop_counter as fc

from torchwise.model.zero_cost import NO_MAC

aten = torch.ops.aten
Shape = tuple[int, ...]
Formula = Callable[..., int]

#: aten op packet -> formula(*args, out_shape=..., **kwargs) with tensors replaced by shapes.
FORMULAS: dict[Any, Formula] = {}
#: ops whose whole cost is attention (products of two activations).
ATTENTION_OPS: set[Any] = set()
#: fused ops mixing projections and attention -> the formula of their attention part.
ATTENTION_PARTS: dict[Any, Formula] = {}
#: generic products -> positions of their two operands (attention when both are activations).
PRODUCT_OPERANDS: dict[Any, tuple[int, int]] = {}


def register(
    *ops: Any, attention: bool = False, operands: tuple[int, int] | None = None
) -> Callable[[Formula], Formula]:
    """Register ``formula`` for each aten op packet (``aten.mm``, not ``aten.mm.default``).

    ``attention``: the op's whole cost is attention. ``operands``: the positions
    of a product's two factors, so that a product of two activations counts as
    attention.
    """

    def decorator(formula: Formula) -> Formula:
        for op in ops:
            if op in FORMULAS:
                raise RuntimeError(f"duplicate FLOP formula for {op}")
            FORMULAS[op] = formula
            if attention:
                ATTENTION_OPS.add(op)
            if operands is not None:
                PRODUCT_OPERANDS[op] = operands
        return formula

    return decorator


def attention_part(*ops: Any) -> Callable[[Formula], Formula]:
    """Register the attention part of a fused op that also does projections."""

    def decorator(formula: Formula) -> Formula:
        for op in ops:
            ATTENTION_PARTS[op] = formula
        return formula

    return decorator


@register(aten.mm, operands=(0, 1))
def mm_flop(a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    # (m, k) @ (k, n): m*n dot products of length k
    (m, k), (_k, n) = a, b
    return 2 * m * k * n


@register(aten.addmm, aten._addmm_activation, operands=(1, 2))
def addmm_flop(_bias: Shape, a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    return mm_flop(a, b)  # bias add is element-wise: not a MAC


@register(aten.bmm, operands=(0, 1))
def bmm_flop(a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    # (B, m, k) @ (B, k, n)
    (batch, m, k), (_b, _k, n) = a, b
    return 2 * batch * m * k * n


@register(aten.baddbmm, operands=(1, 2))
def baddbmm_flop(_bias: Shape, a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    return bmm_flop(a, b)


@register(aten.addbmm, operands=(1, 2))
def addbmm_flop(_bias: Shape, a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    return bmm_flop(a, b)  # sum over the batch of (m, k) @ (k, n)


@register(aten.mv, aten.addmv)
def mv_flop(*args: Any, **__: Any) -> int:
    # mv(A, v) or addmv(bias, A, v): A is (m, k)
    m, k = args[1] if len(args) >= 3 else args[0]
    return 2 * int(m) * int(k)


@register(aten.dot, aten.vdot, operands=(0, 1))
def dot_flop(a: Shape, _b: Shape, *_: Any, **__: Any) -> int:
    return 2 * a[0]


@register(aten._scaled_mm)
def scaled_mm_flop(a: Shape, b: Shape, *_: Any, **__: Any) -> int:
    return mm_flop(a, b)  # fp8 (m, k) @ (k, n); the scales are element-wise


@register(
    aten._weight_int4pack_mm,
    aten._weight_int4pack_mm_for_cpu,
    aten._weight_int4pack_mm_with_scales_and_zeros,
    aten._weight_int8pack_mm,
    aten._dyn_quant_matmul_4bit,
)
def packed_weight_mm_flop(x: Shape, *_: Any, out_shape: Shape, **__: Any) -> int:
    # Weight-only quantised x (m, k) @ W^T -> (m, n): the packed weight's layout varies,
    # the activation and output give m, k and n.
    return 2 * elements(out_shape) * x[-1]


@register(aten._grouped_mm)
def grouped_mm_flop(a: Shape, b: Shape, *_: Any, out_shape: Shape, **__: Any) -> int:
    # Mixture-of-experts matmul. 2D x 3D: tokens (M, K) routed over experts (G, K, N) ->
    # (M, N); 3D x 3D: a batch; 3D x 2D likewise: each output element is one dot product
    # of length K. 2D x 2D (the weight gradient): (M, K_total) @ (K_total, N) split along
    # K into G groups -> (G, M, N), so each group's elements sum over its own slice of K.
    if len(a) == 2 and len(b) == 2:
        return 2 * a[0] * a[1] * b[-1]
    return 2 * elements(out_shape) * a[-1]


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
    attention=True,
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
    attention=True,
)
def sdpa_backward_flop(grad_out: Shape, q: Shape, k: Shape, v: Shape, *_: Any, **__: Any) -> int:
    flop = fc.sdpa_backward_flop_count(  # type: ignore[no-untyped-call]
        tuple(grad_out), tuple(q), tuple(k), tuple(v)
    )
    return int(flop)


def _attention_scores_flop(batch: int, tq: int, tk: int, dim: int) -> int:
    # QK^T and PV summed over heads: 2 x (B, Tq, Tk, dim) MACs
    return 2 * 2 * batch * tq * tk * dim


def _attention_block_flop(batch: int, tq: int, tk: int, dim: int) -> int:
    # in-projections: q over Tq tokens, k and v over Tk tokens, each (dim x dim)
    proj = 2 * batch * tq * dim * dim + 2 * 2 * batch * tk * dim * dim
    out = 2 * batch * tq * dim * dim  # out-projection
    return proj + _attention_scores_flop(batch, tq, tk, dim) + out


def _mha_sizes(q: Shape, k: Shape) -> tuple[int, int, int]:
    # nn.MultiheadAttention's fused inference path: query (B, Tq, D), key (B, Tk, D)
    batch, tq = (q[0], q[1]) if len(q) == 3 else (1, q[0])
    tk = k[1] if len(k) == 3 else k[0]
    return batch, tq, tk


@register(aten._native_multi_head_attention)
def native_mha_flop(q: Shape, k: Shape, _v: Shape, embed_dim: int, *_: Any, **__: Any) -> int:
    return _attention_block_flop(*_mha_sizes(q, k), embed_dim)


@attention_part(aten._native_multi_head_attention)
def native_mha_attention(q: Shape, k: Shape, _v: Shape, embed_dim: int, *_: Any, **__: Any) -> int:
    return _attention_scores_flop(*_mha_sizes(q, k), embed_dim)


def _encoder_sizes(src: Shape) -> tuple[int, int]:
    return (src[0], src[1]) if len(src) == 3 else (1, src[0])


@register(aten._transformer_encoder_layer_fwd)
def encoder_layer_flop(src: Shape, embed_dim: int, *args: Any, **__: Any) -> int:
    # nn.TransformerEncoderLayer's fused inference path on src (B, T, D): self-attention
    # plus the two feed-forward matmuls. args follow embed_dim: num_heads, qkv_weight,
    # qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps, 4 norm tensors, then
    # ffn_weight_1 (F, D) at index 12.
    batch, seq = _encoder_sizes(src)
    ffn_dim = int(args[12][0])
    ffn = 2 * 2 * batch * seq * embed_dim * ffn_dim
    return _attention_block_flop(batch, seq, seq, embed_dim) + ffn


@attention_part(aten._transformer_encoder_layer_fwd)
def encoder_layer_attention(src: Shape, embed_dim: int, *_: Any, **__: Any) -> int:
    batch, seq = _encoder_sizes(src)
    return _attention_scores_flop(batch, seq, seq, embed_dim)


def _rnn_layer_flop(x: Shape, w_ih: Shape, w_hh: Shape) -> int:
    # One direction of one layer over all steps: per token, gates x (input + hidden) MACs,
    # with gates = 4H (LSTM), 3H (GRU) or H (RNN) = the weights' first dim.
    gates, inputs = w_ih
    hidden = w_hh[1]
    tokens = elements(x) // inputs  # T * B
    return 2 * tokens * gates * (inputs + hidden)


@register(aten.mkldnn_rnn_layer)
def mkldnn_rnn_layer_flop(x: Shape, w_ih: Shape, w_hh: Shape, *_: Any, **__: Any) -> int:
    # nn.LSTM on the CPU (oneDNN); x is (T, B, I) or (B, T, I)
    return _rnn_layer_flop(x, w_ih, w_hh)


@register(aten.mkldnn_rnn_layer_backward)
def mkldnn_rnn_layer_backward_flop(x: Shape, w_ih: Shape, w_hh: Shape, *_: Any, **__: Any) -> int:
    # the gradients of the gate pre-activations times the weights (inputs and hidden
    # state), and times the inputs and hidden states (weights): twice the forward
    return 2 * _rnn_layer_flop(x, w_ih, w_hh)


def _functional(packet: Any) -> Any:
    """``aten.hardswish`` for ``aten.hardswish_`` (in-place variants do the same work)."""
    name = getattr(packet, "__name__", "")
    return getattr(aten, name[:-1], packet) if name.endswith("_") else packet


def classify(func: Any) -> str:
    """``"counted"`` (has a formula), ``"no-mac"`` (known, 0 MACs) or ``"unsupported"``."""
    packet = getattr(func, "overloadpacket", func)
    base = _functional(packet)
    if packet in FORMULAS or base in FORMULAS:
        return "counted"
    if getattr(func, "namespace", "aten") == "prim":
        return "no-mac"  # metadata queries (prim.device, prim.layout) under fake tensors
    tags = getattr(func, "tags", ())
    if (
        torch.Tag.pointwise in tags
        or torch.Tag.reduction in tags
        or torch.Tag.view_copy in tags  # view_copy, permute_copy...: a view, materialised
        or getattr(func, "is_view", False)
        or packet in NO_MAC
        or base in NO_MAC
        or (base is not packet and _is_free(base))  # transpose_, relu_: as their functional op
    ):
        return "no-mac"
    return "unsupported"


def _is_free(packet: Any) -> bool:
    """A functional op whose overloads are views, pointwise or reductions."""
    overloads = [getattr(packet, name) for name in packet.overloads()]
    free = (torch.Tag.pointwise, torch.Tag.reduction, torch.Tag.view_copy)
    return any(op.is_view or any(tag in op.tags for tag in free) for op in overloads)


def _shape_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return type(value)(_shape_of(v) for v in value)
    return value


def count(
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    out: Any,
    is_activation: Callable[[Any], bool],
) -> tuple[int, int]:
    """(FLOPs, of which attention) of one call of ``func``; callers check :func:`classify`.

    ``is_activation(tensor)``: was the tensor computed from the forward's inputs?
    """
    packet = func.overloadpacket
    if packet not in FORMULAS:
        packet = _functional(packet)
    shapes = _shape_of(args)
    kw = {k: _shape_of(v) for k, v in kwargs.items()}
    out_shape = _shape_of(out)
    flops = int(FORMULAS[packet](*shapes, out_shape=out_shape, **kw))
    if packet in ATTENTION_OPS:
        return flops, flops
    if packet in ATTENTION_PARTS:
        return flops, int(ATTENTION_PARTS[packet](*shapes, out_shape=out_shape, **kw))
    operands = PRODUCT_OPERANDS.get(packet)
    if operands is not None and all(is_activation(args[i]) for i in operands):
        return flops, flops
    return flops, 0


def elements(shape: Shape) -> int:
    """Number of elements of ``shape`` (1 for a scalar)."""
    return int(prod(shape))
