"""The acceptance figures: batch 1, 224x224, on meta and CPU, in train and eval mode.

MACs here are multiply-accumulates of matrix products and convolutions, the
convention of the published figures (torchvision's "GFLOPS" column is MACs).
"""

from __future__ import annotations

import pytest

from torchwise.model import summarize
from torchwise.target import resolve_target

# ViT-B/16 at 224: 196 patches + class token = 197 tokens, D = 768, MLP 3072, 12 heads.
_T, _D = 197, 768
_VIT_LAYER = (
    _T * _D * 3 * _D  # qkv projection            348,585,984
    + 2 * 12 * _T * _T * 64  # QK^T and PV       59,610,624
    + _T * _D * _D  # out projection              116,195,328
    + 2 * _T * _D * 3072  # MLP                   929,562,624
)
VIT_MACS = 196 * _D * (3 * 16 * 16) + 12 * _VIT_LAYER + _D * 1000  # patch conv + layers + head
assert VIT_MACS == 17_563_828_224

# Sums over every conv and the classifier (torchvision reports 4.09 and 0.30 "GFLOPS").
RESNET50_MACS = 4_089_184_256
MOBILENET_V2_MACS = 300_774_272

# GPT-2 small at seq T = 128: per layer 7,077,888 weight MACs per token (qkv 768*2304,
# proj 768*768, MLP 2*768*3072) + attention 2*T*T*768; tied lm_head 768*50257 per token.
_G = 128
GPT2_MACS_128 = 12 * (_G * 7_077_888 + 2 * _G * _G * 768) + _G * 768 * 50257
assert GPT2_MACS_128 == 16_114_089_984

CASES = [
    ("zoo:resnet50", [], 25_557_032, RESNET50_MACS, "4.089"),
    ("zoo:mobilenet_v2", [], 3_504_872, MOBILENET_V2_MACS, "0.301"),
    ("zoo:vit_b_16", [], 86_567_656, VIT_MACS, "17.564"),
    ("zoo:gpt2", ["i64[batch=1,seq=128]<50257"], 124_439_808, GPT2_MACS_128, "16.114"),
]


# Meta in both modes; the real CPU run in eval, where the fused inference kernels
# (TransformerEncoderLayer's fast path, SDPA's CPU kernel) differ from meta's ops.
# CPU in train mode (20-30 s per model on a loaded machine) dispatches the unfused ops
# of meta's train mode and the SDPA CPU kernel of the CPU eval run: nothing new.
DEVICE_MODES = [("meta", "eval"), ("meta", "train"), ("cpu", "eval")]


@pytest.mark.parametrize(("device", "mode"), DEVICE_MODES)
@pytest.mark.parametrize(("target", "inputs", "params", "macs", "gmacs"), CASES)
def test_acceptance_figures(
    target: str, inputs: list[str], params: int, macs: int, gmacs: str, device: str, mode: str
) -> None:
    resolved = resolve_target(target, inputs=inputs, device=device)
    summary = summarize(
        resolved.model, resolved.args, resolved.kwargs, device=device, mode=mode,
        estimate_training=False, depth=0,
    )  # fmt: skip
    assert summary.total_params == params
    assert summary.macs_forward == macs
    assert f"{summary.macs_forward / 1e9:.3f}" == gmacs
    assert summary.unsupported_ops == {}
    assert summary.device_used == device


def test_gpt2_tied_weights_counted_once_and_listed() -> None:
    resolved = resolve_target("zoo:gpt2", inputs=["i64[1,8]<50257"], device="meta")
    summary = summarize(resolved.model, resolved.args, resolved.kwargs, estimate_training=False)
    # torchinfo reports 163,037,184 = 124,439,808 + 38,597,376 (wte counted twice)
    assert summary.total_params == 124_439_808
    assert summary.shared_params == [["wte.weight", "lm_head.weight"]]
    assert summary.param_bytes_by_dtype == {"float32": 124_439_808 * 4}


def test_llama_7b_on_meta_with_hand_arithmetic() -> None:
    resolved = resolve_target("zoo:llama-7b", inputs=["i64[1,512]<32000"], device="meta")
    summary = summarize(resolved.model, resolved.args, resolved.kwargs, estimate_training=False)
    t, d, hidden, vocab = 512, 4096, 11008, 32000
    per_layer = t * (4 * d * d + 3 * d * hidden) + 2 * t * t * d  # projections + attention
    assert summary.total_params == 6_738_415_616
    assert summary.macs_forward == 32 * per_layer + t * d * vocab
    assert summary.output_shapes == [(1, 512, 32000)]
