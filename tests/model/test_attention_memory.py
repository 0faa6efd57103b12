"""The training-memory estimate models the attention kernel the target device runs.

On meta, F.scaled_dot_product_attention always takes the math path, which keeps the
(B, H, T, T) scores for backward; the fused kernels a real device takes keep only
the output and a log-sum-exp. The estimate is checked against the peak of a real
CPU training step, measured from the allocator's events (torchwise.tune.memory).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from torchwise.model import summarize
from torchwise.model.attention import (
    EFFICIENT,
    FLASH,
    FLASH_CPU,
    MATH,
    SdpaCall,
    cpu_kernel,
    cuda_kernel,
)
from torchwise.model.trace import trace
from torchwise.tune.memory import live_training_state, measure_step_memory

VOCAB, BATCH, SEQ = 64, 2, 256


class CausalLM(nn.Module):
    """A two-layer causal LM; ``sdpa`` picks F.scaled_dot_product_attention or the
    same attention written out (softmax of QK^T, which autograd keeps)."""

    def __init__(self, sdpa: bool, dropout: float = 0.0, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.sdpa, self.dropout, self.heads = sdpa, dropout, heads
        self.embed = nn.Embedding(VOCAB, dim)
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * dim) for _ in range(2))
        self.proj = nn.ModuleList(nn.Linear(dim, dim) for _ in range(2))
        self.head = nn.Linear(dim, VOCAB)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        p = self.dropout if self.training else 0.0
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        T = q.shape[-2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        weights = F.dropout(scores.masked_fill(~causal, -math.inf).softmax(-1), p)
        return weights @ v  # (B, H, T, D)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)  # (B, T, C)
        B, T, C = x.shape
        for qkv, proj in zip(self.qkv, self.proj, strict=True):
            q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in qkv(x).split(C, 2))
            x = x + proj(self.attend(q, k, v).transpose(1, 2).reshape(B, T, C))
        return self.head(x)  # (B, T, VOCAB)


def measured_peak(model: nn.Module) -> int:
    """Peak bytes of one AdamW step on the CPU (after a first step made the state)."""
    torch.manual_seed(0)
    ids, labels = torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ))
    optimizer = torch.optim.AdamW(model.parameters())

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(ids).flatten(0, 1), labels.flatten()).backward()
        optimizer.step()

    step()
    optimizer.zero_grad(set_to_none=True)
    state = lambda: live_training_state(model, optimizer)  # noqa: E731
    return measure_step_memory(step, torch.device("cpu"), state).peak


def estimate(model: nn.Module, memory_for: str) -> tuple[int, dict[str, int]]:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    summary = summarize(model, (ids,), memory_for=memory_for)
    assert summary.training is not None and summary.device_used == "meta"
    return summary.training.total("adamw"), summary.attention_kernels


# The estimate against the measured peak: 1.02-1.09 on the CPU models of
# docs/benchmarks.md; the math path's T x T matrices make it 1.5-1.8x here.
BAND = (0.85, 1.2)


def test_sdpa_estimate_for_the_cpu_matches_its_measured_peak() -> None:
    model = CausalLM(sdpa=True).train()
    total, kernels = estimate(model, "cpu")
    assert kernels == {FLASH_CPU: 2}
    ratio = total / measured_peak(model)
    assert BAND[0] <= ratio <= BAND[1], ratio
    with sdpa_kernel([SDPBackend.MATH]):  # a user who turned the fused kernels off
        math_total, math_kernels = estimate(model, "cpu")
    assert math_kernels == {MATH: 2} and math_total > 1.4 * total


def test_attention_dropout_keeps_the_cpu_on_the_math_path_but_not_cuda() -> None:
    # The CPU's flash kernel refuses dropout; CUDA's memory-efficient kernel takes it.
    model = CausalLM(sdpa=True, dropout=0.1).train()
    cpu_total, cpu_kernels = estimate(model, "cpu")
    cuda_total, cuda_kernels = estimate(model, "cuda")
    assert cpu_kernels == {MATH: 2} and cuda_kernels == {EFFICIENT: 2}
    ratio = cpu_total / measured_peak(model)
    assert BAND[0] <= ratio <= BAND[1], ratio
    # math keeps the softmax, the dropout mask and the dropped-out weights per layer
    assert cpu_total - cuda_total >= 2 * 3 * BATCH * 4 * SEQ * SEQ * 4 * 0.9


def test_written_out_attention_is_estimated_the_same_for_any_target() -> None:
    model = CausalLM(sdpa=False).train()
    cpu_total, cpu_kernels = estimate(model, "cpu")
    cuda_total, cuda_kernels = estimate(model, "cuda")
    assert cpu_kernels == cuda_kernels == {} and cpu_total == cuda_total
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    unmodelled = trace(model, (ids,), {}, device=torch.device("meta"), train=True, backward=True)
    summary = summarize(model, (ids,), memory_for="cuda")
    assert summary.training is not None
    assert summary.training.activations == unmodelled.saved_activation_bytes
    # What the estimate leaves out: at the peak, the backward's gradients of the last
    # layer's softmax and scores, two (B, H, T, T) matrices, are alive beside it.
    scores = BATCH * 4 * SEQ * SEQ * 4
    assert cpu_total <= measured_peak(model) <= cpu_total + 2 * scores


def test_the_kernel_changes_memory_not_forward_flops() -> None:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    model = CausalLM(sdpa=True, dropout=0.1)
    cpu = summarize(model, (ids,), memory_for="cpu")  # math: dropout
    cuda = summarize(model, (ids,), memory_for="cuda")  # memory-efficient
    assert cpu.flops_forward == cuda.flops_forward > 0
    assert cpu.attention_flops_forward == cuda.attention_flops_forward > 0
    # the fused backward recomputes QK^T: one more (B*H, T, T, D) product per layer
    extra = 2 * 2 * BATCH * 4 * SEQ * SEQ * 16
    assert cuda.flops_backward == cpu.flops_backward + extra  # type: ignore[operator]
    assert cuda.peak_activation_bytes < cpu.peak_activation_bytes


def test_a_real_run_takes_its_real_kernel() -> None:
    ids = torch.randint(0, VOCAB, (BATCH, 32))
    summary = summarize(CausalLM(sdpa=True), (ids,), device="cpu")
    assert summary.memory_for is None and summary.attention_kernels == {}
    meta = summarize(CausalLM(sdpa=True), (ids,), memory_for="cpu")
    assert meta.memory_for == "cpu" and meta.attention_kernels == {FLASH_CPU: 2}


def test_fake_tensor_runs_model_the_target_too() -> None:
    class ChecksDevice(CausalLM):
        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            if ids.device.type == "meta":
                raise RuntimeError("needs a real device")
            return super().forward(ids)

    model = ChecksDevice(sdpa=True, dropout=0.1)
    ids = torch.randint(0, VOCAB, (BATCH, 32))
    summary = summarize(model, (ids,), memory_for="cuda")
    assert summary.device_used == "cpu (fake tensors)"
    assert summary.attention_kernels == {EFFICIENT: 2}


def meta_call(*shapes: tuple[int, ...], dtype: torch.dtype = torch.float32, **kw: Any) -> SdpaCall:
    q, k, v = (torch.empty(s, device="meta", dtype=dtype, requires_grad=True) for s in shapes)
    return SdpaCall.bind((q, k, v), kw)


QKV = ((2, 4, 128, 64),) * 3


@pytest.mark.parametrize(
    ("shapes", "dtype", "kw", "kernel"),
    [
        (QKV, torch.float32, {"is_causal": True, "dropout_p": 0.1}, EFFICIENT),  # GPT-2 fp32
        (QKV, torch.bfloat16, {"is_causal": True, "dropout_p": 0.1}, FLASH),
        (QKV, torch.float16, {"attn_mask": torch.ones(128, 128, dtype=torch.bool)}, EFFICIENT),
        (QKV, torch.float64, {}, MATH),  # no fused kernel takes fp64 on CUDA
        (((2, 4, 128, 6),) * 3, torch.float32, {}, MATH),  # head dim not a multiple of 4
        (((2, 4, 128, 6),) * 3, torch.float16, {}, FLASH),  # flash pads it to 8
        (((2, 4, 128, 512),) * 3, torch.float16, {}, EFFICIENT),  # over flash's 256
        (
            ((2, 4, 64, 64), (2, 4, 128, 64), (2, 4, 128, 64)),
            torch.float16,
            {"is_causal": True},
            EFFICIENT,
        ),  # causal, non-square: not flash
        (((4, 128, 64),) * 3, torch.float32, {}, MATH),  # fused kernels need 4-D inputs
        (
            ((2, 8, 128, 64), (2, 2, 128, 64), (2, 2, 128, 64)),
            torch.bfloat16,
            {"enable_gqa": True},
            FLASH,
        ),  # grouped-query attention
    ],
)
def test_cuda_kernel_follows_torchs_rules(
    shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype, kw: dict[str, Any], kernel: str
) -> None:
    kw = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    assert cuda_kernel(meta_call(*shapes, dtype=dtype, **kw)) == kernel


def test_cuda_kernel_honours_the_backends_switched_off_and_the_gpu() -> None:
    call = meta_call(*QKV, dtype=torch.float16, is_causal=True)
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        assert cuda_kernel(call) == EFFICIENT
    with sdpa_kernel([SDPBackend.MATH]):
        assert cuda_kernel(call) == MATH
    assert cuda_kernel(call, capability=(7, 5)) == EFFICIENT  # no flash before Ampere
    bf16 = meta_call(*QKV, dtype=torch.bfloat16)
    assert cuda_kernel(bf16, capability=(7, 5)) == MATH  # nor bf16 memory-efficient


def _cpu_cases() -> list[tuple[str, tuple[torch.Tensor, ...], dict[str, Any]]]:
    q = torch.randn(2, 4, 32, 16)
    mask2, mask4 = torch.ones(32, 32, dtype=torch.bool), torch.zeros(2, 1, 32, 32)
    return [
        ("plain", (q, q, q), {"is_causal": True}),
        ("dropout", (q, q, q), {"dropout_p": 0.1}),
        ("bool mask", (q, q, q), {"attn_mask": mask2}),
        ("float mask", (q, q, q), {"attn_mask": mask4}),
        ("mask needs grad", (q, q, q), {"attn_mask": mask4.clone().requires_grad_()}),
        ("3-D mask", (q, q, q), {"attn_mask": torch.zeros(2, 32, 32)}),
        ("3-D inputs", (q[0], q[0], q[0]), {}),
        ("transposed", (q.transpose(-1, -2),) * 3, {}),
        ("gqa", (q, q[:, :2], q[:, :2]), {"enable_gqa": True}),
        ("head dims differ", (q, q, q[..., :8]), {}),
        ("bf16", (q.bfloat16(),) * 3, {}),
    ]


@pytest.mark.parametrize(("name", "tensors", "kw"), _cpu_cases(), ids=[c[0] for c in _cpu_cases()])
def test_cpu_kernel_is_torchs_own_choice_on_real_tensors(
    name: str, tensors: tuple[torch.Tensor, ...], kw: dict[str, Any]
) -> None:
    real = torch._fused_sdp_choice(*tensors, **kw)
    expected = FLASH_CPU if real == SDPBackend.FLASH_ATTENTION.value else MATH
    on_meta = tuple(t.to("meta") for t in tensors)
    meta_kw = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    if name == "mask needs grad":
        meta_kw["attn_mask"] = meta_kw["attn_mask"].detach().requires_grad_()
    assert cpu_kernel(SdpaCall.bind(on_meta, meta_kw)) == expected


class GroupedQuery(nn.Module):
    """Grouped-query attention handed to SDPA (8 query heads share 2 key/value heads)."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.kv = nn.Linear(64, 64), nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q(x).view(B, T, 8, 8).transpose(1, 2)  # (B, 8, T, 8)
        k, v = (t.view(B, T, 2, 8).transpose(1, 2) for t in self.kv(x).split(16, 2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return y.transpose(1, 2).reshape(B, T, 64)


@pytest.mark.parametrize(("memory_for", "kernel"), [("cuda", EFFICIENT), ("cpu", FLASH_CPU)])
def test_grouped_query_attention_trains_with_the_fused_kernel(memory_for: str, kernel: str) -> None:
    x = torch.randn(2, 64, 64)
    summary = summarize(GroupedQuery(), (x,), memory_for=memory_for)
    real = summarize(GroupedQuery(), (x,), device="cpu")  # the CPU's real kernel
    assert summary.attention_kernels == {kernel: 1} and summary.flops_backward
    assert summary.training is not None and real.training is not None
    assert summary.flops_forward == real.flops_forward
