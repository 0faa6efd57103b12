"""FLOP formulas where the peers are wrong, each with its hand arithmetic."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from torchwise.model import summarize
from torchwise.model.flops import FORMULAS, classify


class Fn(nn.Module):
    """Wrap a function of the inputs as a module, so summarize can run it."""

    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(*args)


def macs(model: nn.Module, *args: torch.Tensor, device: str = "meta") -> int:
    summary = summarize(model, args, device=device, estimate_training=False)
    assert summary.unsupported_ops == {}
    return summary.macs_forward


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_sdpa_counted_on_cpu(device: str) -> None:
    q = k = v = torch.randn(2, 4, 64, 32)  # (B, h, T, d)
    model = Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    # QK^T: B*h*T*T*d = 2*4*64*64*32 = 1,048,576; PV the same
    assert macs(model, q, k, v, device=device) == 2 * 1_048_576


def test_sdpa_gap_in_flop_counter_is_real() -> None:
    # Documents why the formula exists: FlopCounterMode sees the CPU kernel as free.
    q = torch.randn(2, 4, 64, 32)
    with FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, q, q)
    assert counter.get_total_flops() == 0
    assert classify(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default) == "counted"


def test_fused_transformer_encoder_layer_inference_path() -> None:
    layer = nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True).eval()
    x = torch.randn(2, 10, 64)  # (B, T, D)
    b, t, d, f = 2, 10, 64, 256
    expected = b * t * d * 3 * d + 2 * b * t * t * d + b * t * d * d + 2 * b * t * d * f
    assert expected == 1_008_640
    # On CPU, eval + no_grad takes aten._transformer_encoder_layer_fwd; on meta the
    # unfused ops. Both must agree with the arithmetic.
    assert macs(layer, x, device="cpu") == expected
    assert macs(layer, x, device="meta") == expected


def test_fused_multi_head_attention_inference_path() -> None:
    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mha(x, x, x, need_weights=False)[0]

    model = SelfAttention().eval()
    x = torch.randn(3, 7, 32)
    b, t, d = 3, 7, 32
    expected = 3 * b * t * d * d + 2 * b * t * t * d + b * t * d * d  # qkv, attention, out
    assert macs(model, x, device="cpu") == expected == 95_424
    assert macs(model, x, device="meta") == expected


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: torch.einsum("bij,bjk->bik", a, b),
        lambda a, b: a @ b,
        lambda a, b: torch.matmul(a, b),
        torch.bmm,
    ],
    ids=["einsum", "matmul-operator", "matmul", "bmm"],
)
def test_batched_products(fn: Callable[..., torch.Tensor]) -> None:
    a, b = torch.randn(5, 6, 7), torch.randn(5, 7, 8)
    assert macs(Fn(fn), a, b) == 5 * 6 * 7 * 8  # B * m * k * n = 1,680


def test_four_dimensional_matmul_like_attention_scores() -> None:
    q, k = torch.randn(2, 3, 16, 8), torch.randn(2, 3, 8, 16)  # (B, h, T, d) @ (B, h, d, T)
    assert macs(Fn(torch.matmul), q, k) == 2 * 3 * 16 * 8 * 16  # 12,288


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_grouped_and_depthwise_convolutions(device: str) -> None:
    x = torch.randn(1, 32, 16, 16)
    grouped = nn.Conv2d(32, 64, 3, padding=1, groups=4, bias=False)
    # out 16*16 positions * 64 out channels * (32/4) in channels * 3*3 kernel
    assert macs(grouped, x, device=device) == 16 * 16 * 64 * 8 * 9 == 1_179_648
    depthwise = nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
    assert macs(depthwise, x, device=device) == 16 * 16 * 32 * 1 * 9 == 73_728


def test_transposed_convolution_counts_input_positions() -> None:
    deconv = nn.ConvTranspose2d(8, 4, 2, stride=2)
    x = torch.randn(1, 8, 5, 5)
    assert macs(deconv, x) == 5 * 5 * 8 * 4 * 2 * 2  # input positions * cin * cout * k*k


def test_linear_and_vector_products() -> None:
    assert macs(nn.Linear(10, 20), torch.randn(3, 4, 10)) == 3 * 4 * 10 * 20
    assert macs(Fn(torch.mv), torch.randn(6, 9), torch.randn(9)) == 54
    assert macs(Fn(torch.dot), torch.randn(9), torch.randn(9)) == 9


def test_unsupported_ops_are_listed_not_zeroed() -> None:
    model = Fn(lambda x: torch.fft.rfft(x).abs())
    summary = summarize(model, (torch.randn(4, 64),), estimate_training=False)
    assert "_fft_r2c" in summary.unsupported_ops
    assert any("_fft_r2c" in note for note in summary.notes)


def test_backward_flops_are_measured() -> None:
    # Linear(10 -> 20) on (4, 10): forward 800 MACs; backward computes grad_input
    # (800) and grad_weight (800) when the input requires no grad: only grad_weight.
    model = nn.Linear(10, 20)
    summary = summarize(model, (torch.randn(4, 10),), mode="train")
    assert summary.flops_forward == 2 * 800
    assert summary.flops_backward == 2 * 800


def test_every_formula_key_is_an_op_packet() -> None:
    assert all(isinstance(op, torch._ops.OpOverloadPacket) for op in FORMULAS)
