"""Attention's share, the two FLOP conventions, the explicit no-MAC table, the new formulas."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchwise.model import summarize
from torchwise.model.flops import FORMULAS, classify, grouped_mm_flop
from torchwise.model.zero_cost import NO_MAC_OPS

aten = torch.ops.aten
B, T, C, H = 2, 16, 32, 4  # batch, tokens, channels, heads: head size 8


class ExplicitAttention(nn.Module):
    """Self-attention written out, as minGPT and Hugging Face's eager path do."""

    def __init__(self, fused: bool = False) -> None:
        super().__init__()
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.fused = fused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k, v))  # (B, h, T, d)
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1) / math.sqrt(C // H)).softmax(-1)  # (B, h, T, T)
            y = att @ v  # (B, h, T, d)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


# QK^T and PV: each B*h*T*T*d = 2*4*16*16*8 = 16,384 MACs -> 2 * 2 * 16,384 FLOPs
ATTENTION_FLOPS = 2 * 2 * B * H * T * T * (C // H)
# qkv (B*T*C*3C) and proj (B*T*C*C): 2*16*32*96 + 2*16*32*32 = 98,304 + 32,768 MACs
WEIGHT_FLOPS = 2 * (B * T * C * 3 * C + B * T * C * C)


@pytest.mark.parametrize("fused", [False, True], ids=["matmul", "sdpa"])
@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_attention_share_and_the_no_attention_convention(fused: bool, device: str) -> None:
    x = torch.randn(B, T, C)
    model = ExplicitAttention(fused)
    full = summarize(model, (x,), device=device, estimate_training=False)
    assert full.flops_convention == "full"
    assert full.attention_flops_forward == ATTENTION_FLOPS == 65_536
    assert full.flops_forward == WEIGHT_FLOPS + ATTENTION_FLOPS
    peer = summarize(
        model, (x,), device=device, estimate_training=False, flops_convention="no-attention"
    )
    assert peer.flops_forward == WEIGHT_FLOPS == 262_144
    assert peer.macs_forward == WEIGHT_FLOPS // 2
    assert peer.attention_flops_forward == ATTENTION_FLOPS  # still reported
    root = next(layer for layer in peer.layers if layer.name == "")
    assert root.flops == WEIGHT_FLOPS and root.attention_flops == ATTENTION_FLOPS


def test_a_product_with_a_weight_is_not_attention() -> None:
    class Bilinear(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(C, C))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x @ self.w.t()) @ (x @ self.w).transpose(-2, -1)  # (B,T,C)@(B,C,T)

    summary = summarize(Bilinear(), (torch.randn(B, T, C),), estimate_training=False)
    weights = 2 * 2 * B * T * C * C  # the two products with w
    assert summary.attention_flops_forward == 2 * B * T * C * T  # the activation product
    assert summary.flops_forward == weights + summary.attention_flops_forward


def test_fused_encoder_layer_reports_its_attention_part() -> None:
    layer = nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True).eval()
    summary = summarize(layer, (torch.randn(2, 10, 64),), device="cpu", estimate_training=False)
    assert summary.attention_flops_forward == 2 * 2 * 2 * 10 * 10 * 64  # QK^T + PV = 51,200
    assert summary.flops_forward == 2 * 1_008_640  # the whole layer, as before


def test_training_flops_stay_in_the_full_convention() -> None:
    x = torch.randn(B, T, C)
    full = summarize(ExplicitAttention(), (x,), mode="train")
    peer = summarize(ExplicitAttention(), (x,), mode="train", flops_convention="no-attention")
    assert peer.flops_training == full.flops_training


@pytest.mark.parametrize(
    "op",
    [aten.hardswish_.default, aten.hardswish.default, aten.pixel_shuffle.default,
     aten.histc.default, aten.floor_divide.default, aten.native_layer_norm.default,
     aten.mul_.Tensor],
)  # fmt: skip
def test_zero_cost_ops_are_known(op: torch._ops.OpOverload) -> None:
    assert classify(op) == "no-mac"


def test_matrix_products_are_never_taken_for_zero_cost_ops() -> None:
    # The old substring list matched "zero" in this op's name and counted it as free.
    assert classify(aten._weight_int4pack_mm_with_scales_and_zeros.default) == "counted"
    assert classify(aten._grouped_mm.default) == "counted"
    assert classify(aten.mkldnn_rnn_layer.default) == "counted"
    assert classify(aten._cdist_forward.default) == "unsupported"  # no formula: reported


def test_the_no_mac_table_is_explicit_and_disjoint_from_the_formulas() -> None:
    for category, ops in NO_MAC_OPS.items():
        assert ops, category
        for op in ops:
            assert isinstance(op, torch._ops.OpOverloadPacket), op
            assert op not in FORMULAS, op


def test_zero_cost_modules_are_never_unsupported() -> None:
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.Hardswish(inplace=True), nn.PixelShuffle(2),
        nn.Hardsigmoid(), nn.Upsample(scale_factor=2), nn.MaxPool2d(2),
    )  # fmt: skip
    for device in ("meta", "cpu"):
        summary = summarize(model, (torch.randn(1, 3, 8, 8),), device=device, mode="train")
        assert summary.unsupported_ops == {}, device
        assert summary.macs_forward == 8 * 8 * 16 * 3 * 9  # the conv only: 27,648


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_lstm_is_counted_on_the_cpu_kernel_too(device: str) -> None:
    # 2 layers, T=7, B=3, I=8, H=16: per token 4H*(I+H) then 4H*(H+H) MACs
    lstm = nn.LSTM(8, 16, num_layers=2)
    summary = summarize(lstm, (torch.randn(7, 3, 8),), device=device, mode="train")
    assert summary.macs_forward == 7 * 3 * (64 * 24 + 64 * 32) == 75_264
    assert summary.unsupported_ops == {}
    assert summary.flops_backward is not None and summary.flops_backward > 0


def test_grouped_mm_formula() -> None:
    # 12 tokens routed over 3 experts of (8 -> 5): each token one (8 x 5) product
    assert grouped_mm_flop((12, 8), (3, 8, 5), out_shape=(12, 5)) == 2 * 12 * 8 * 5
    # batched (G, M, K) @ (G, K, N)
    assert grouped_mm_flop((3, 4, 8), (3, 8, 5), out_shape=(3, 4, 5)) == 2 * 3 * 4 * 8 * 5
    # weight gradient: (M, K_total) @ (K_total, N), K split over 3 groups -> (3, M, N)
    assert grouped_mm_flop((4, 24), (24, 5), out_shape=(3, 4, 5)) == 2 * 4 * 24 * 5
