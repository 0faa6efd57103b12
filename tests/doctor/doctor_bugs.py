"""The doctor bug catalogue: small models that each reproduce a bug people really make.

Every :class:`Case` names the check meant to catch it; ``CLEAN`` models must pass
every check. ``bench/doctor_catalogue.py`` runs both torchwise doctor and
torchtest over these same cases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

B, D, C = 8, 16, 5  # batch, features, classes
T, V = 8, 32  # sequence length, vocabulary


@dataclass
class Case:
    name: str
    bug: str
    check: str  # the check id meant to catch it
    build: Callable[[], nn.Module]
    inputs: Callable[[], Any]
    options: dict[str, Any] = field(default_factory=dict)


def feats() -> torch.Tensor:
    return torch.randn(B, D, generator=torch.Generator().manual_seed(1))  # (B, D)


def images() -> torch.Tensor:
    return torch.randn(B, 3, 8, 8, generator=torch.Generator().manual_seed(1))  # (B, 3, 8, 8)


def tokens() -> torch.Tensor:
    return torch.randint(0, V, (4, T), generator=torch.Generator().manual_seed(1))  # (4, T)


def seq_feats() -> torch.Tensor:
    return torch.randn(4, T, D, generator=torch.Generator().manual_seed(1))  # (4, T, D)


# -- clean reference models ------------------------------------------------------


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(D, 32)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(32, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(F.relu(self.fc1(x))))  # (B, C)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, stride=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.head = nn.Linear(16, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))  # (B, 8, 8, 8)
        x = F.relu(self.bn2(self.conv2(x)))  # (B, 16, 4, 4)
        return self.head(x.mean((2, 3)))  # (B, C)


class Attention(nn.Module):
    """Causal self-attention; ``causal=False`` or ``diagonal`` != 1 reproduce mask bugs."""

    def __init__(self, dim: int, causal: bool = True, diagonal: int = 1) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.causal, self.diagonal = causal, diagonal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 x (n, t, d)
        scores = q @ k.transpose(1, 2) / d**0.5  # (n, t, t)
        if self.causal:
            future = torch.ones(t, t, dtype=torch.bool, device=x.device)
            scores = scores.masked_fill(future.triu(self.diagonal), float("-inf"))
        return self.proj(scores.softmax(-1) @ v)  # (n, t, d)


class TinyGPT(nn.Module):
    def __init__(self, causal: bool = True, diagonal: int = 1) -> None:
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        self.ln1 = nn.LayerNorm(D)
        self.attn = Attention(D, causal, diagonal)
        self.ln2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.head = nn.Linear(D, V)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))  # (n, t, D)
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)  # (n, t, V)


# -- buggy models ----------------------------------------------------------------


class TimeMajorReshape(nn.Module):
    """Transposes to (T, B, D) for a sequence op and flattens without transposing back."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(D, D)
        self.head = nn.Linear(T * D, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        h = self.proj(x).transpose(0, 1)  # (T, n, D)
        h = torch.tanh(h.cumsum(0))  # running sum over time
        return self.head(h.reshape(n, -1))  # BUG: rows now mix samples


class SoftmaxOverBatch(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(super().forward(x), dim=0)  # BUG: dim=0 is the batch


class NoRunningStats(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(D, 32)
        self.bn = nn.BatchNorm1d(32, track_running_stats=False)  # BUG: batch stats in eval
        self.head = nn.Linear(32, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.bn(self.fc(x))))


class UnusedLayer(MLP):
    def __init__(self) -> None:
        super().__init__()
        self.fc_extra = nn.Linear(32, 32)  # BUG: built, never called


class DetachedBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Linear(D, C)
        self.aux = nn.Linear(D, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x) + self.aux(x).detach()  # BUG: aux never learns


class FunctionalDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D, 32), nn.Linear(32, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.dropout(F.relu(self.fc1(x)), 0.5))  # BUG: no training=


class CarriedState(nn.Module):
    """Keeps a running context on self across calls (a stateful RNN-style cache)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(D, C)
        self.context: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if self.context is not None:
            h = h + 0.5 * self.context  # BUG: depends on the previous call
        self.context = h.detach()
        return h


class FrozenByAccident(MLP):
    def __init__(self) -> None:
        super().__init__()
        for p in self.fc1.parameters():  # BUG: warm-up freeze never undone
            p.requires_grad = False


class LogOfNegative(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(self.fc1(x)).nan_to_num(nan=float("nan")) @ self.fc2.weight.T  # BUG


class SqrtAtZero(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(D, C)
        self.delta = nn.Parameter(torch.zeros(C))  # LoRA-style zero-init offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = 1 + torch.sqrt((self.delta**2).sum())  # BUG: d sqrt/dx is inf at 0
        return self.fc(x) * scale


class ExplodingInit(MLP):
    def __init__(self) -> None:
        super().__init__()
        for layer in (self.fc1, self.fc2):
            nn.init.normal_(layer.weight, std=3.0)  # BUG: std 3 instead of 1/sqrt(fan_in)


class SoftmaxThenCE(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).softmax(-1)  # BUG: CrossEntropyLoss applies it again


class DeepSigmoid(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(D, D) for _ in range(12))
        self.head = nn.Linear(D, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.sigmoid(layer(x))  # BUG: 12 saturating layers, no normalization
        return self.head(x)


class NegativeBias(MLP):
    def __init__(self) -> None:
        super().__init__()
        nn.init.constant_(self.fc1.bias, -5.0)  # BUG: every pre-activation below 0


class NumpyNoise(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.from_numpy(np.random.normal(0, 0.1, x.shape).astype("float32"))
        return super().forward(x + noise if self.training else x)  # BUG: numpy RNG


class PerSampleBatchNorm(SmallCNN):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BUG: BatchNorm called one sample at a time
        rows = [F.relu(self.bn1(self.conv1(xi[None]))) for xi in x]
        x = F.relu(self.bn2(self.conv2(torch.cat(rows))))
        return self.head(x.mean((2, 3)))


class KeepProbDropout(MLP):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.9)  # BUG: meant keep_prob=0.9 (TensorFlow)


class PrototypeDistance(nn.Module):
    """A prototype head whose squared distances expand as |e|^2 + |p|^2 - 2 e.p."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(D, 64)
        self.protos = nn.Parameter(torch.randn(C, 64) * 0.1 + 3.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = F.relu(self.embed(x)) + 3.0  # (B, 64), positive features with a large mean
        # BUG: the matmul runs in bf16 under autocast and the sum cancels catastrophically
        d2 = (e**2).sum(-1, keepdim=True) + (self.protos**2).sum(-1) - 2 * e @ self.protos.T
        return -d2  # (B, C)


class FixedDeviceTensor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(D, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = torch.zeros(x.shape[0], C, device="cpu")  # BUG: fixed device
        return self.fc(x) + bias


class PlainListLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = [nn.Linear(D, D) for _ in range(2)]  # BUG: not an nn.ModuleList
        self.head = nn.Linear(D, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = F.relu(block(x))
        return self.head(x)


class PlainTensorMask(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(D, C)
        self.mask = torch.ones(C)  # BUG: not a registered buffer, .to() skips it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.mask


class DataDependentBranch(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.mean() > 0:  # BUG: Python control flow on tensor data
            x = x * 2
        return super().forward(x)


class TiedGPT(TinyGPT):
    """Input and output embeddings share one Parameter (GPT-2's tie)."""

    def __init__(self) -> None:
        super().__init__()
        nn.init.normal_(self.tok.weight, std=0.02)  # GPT-2's init, as the tie needs
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.tok.weight


class SpatialAttention(nn.Module):
    """SAGAN-style self-attention over the H*W positions of a feature map."""

    def __init__(self, channels: int = 8, axis: int = -1) -> None:
        super().__init__()
        self.q = nn.Conv2d(channels, channels // 2, 1)
        self.k = nn.Conv2d(channels, channels // 2, 1)
        self.v = nn.Conv2d(channels, channels, 1)
        self.axis = axis

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        q = self.q(x).flatten(2).transpose(1, 2)  # (n, hw, c/2)
        k = self.k(x).flatten(2)  # (n, c/2, hw)
        attn = torch.softmax(q @ k, dim=self.axis)  # (n, hw queries, hw keys)
        out = self.v(x).flatten(2) @ attn.transpose(1, 2)  # (n, c, hw): sums over the keys
        return x + out.view(n, c, h, w)


class AttentionCNN(nn.Module):
    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.attn = SpatialAttention(8, axis)
        self.head = nn.Linear(8, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.attn(F.relu(self.stem(x))).mean((2, 3)))  # (B, C)


class FourierFeatures(nn.Module):
    """A fixed random projection kept as a buffer on purpose (random Fourier features)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("freqs", torch.randn(D, 16) * 2.0)
        self.head = nn.Linear(32, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = x @ self.freqs  # (B, 16)
        return self.head(torch.cat([z.sin(), z.cos()], -1))  # (B, C)


class ResidualMLP(nn.Module):
    """Pre-norm residual blocks; ``twice`` adds the input back a second time."""

    class Block(nn.Module):
        def __init__(self, twice: bool) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(D)
            self.fc = nn.Linear(D, D)
            self.twice = twice

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = x + self.fc(self.norm(x))
            return out + x if self.twice else out  # BUG when twice: 2x + f(x)

    def __init__(self, twice: bool = False) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(self.Block(twice) for _ in range(3))
        self.head = nn.Linear(D, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class BufferWeight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(D, 32)
        # BUG: a weight registered as a buffer (meant nn.Parameter): it never trains
        self.register_buffer("weight", torch.randn(C, 32) / 32**0.5)
        self.bias = nn.Parameter(torch.zeros(C))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.relu(self.fc1(x)), self.weight, self.bias)


class CopiedTieGPT(TinyGPT):
    def __init__(self) -> None:
        super().__init__()
        nn.init.normal_(self.tok.weight, std=0.02)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = nn.Parameter(self.tok.weight.detach().clone())  # BUG: a copy


class OwnLossGPT(TinyGPT):
    """Computes its own loss when given targets, as nanoGPT does; ``dim`` is log_softmax's."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> Any:
        logits = super().forward(idx)  # (n, t, V)
        if targets is None:
            return logits
        logp = F.log_softmax(logits, dim=self.dim)  # BUG when dim=1: over time, not vocab
        return logits, F.nll_loss(logp.reshape(-1, V), targets.reshape(-1))


def _gpt(causal: bool, diagonal: int = 1) -> Callable[[], nn.Module]:
    return lambda: TinyGPT(causal, diagonal)


CAUSAL = {"causal_dim": 1}

CLEAN: list[Case] = [
    Case("mlp", "clean MLP with dropout", "", MLP, feats),
    Case("cnn", "clean CNN with batch norm", "", SmallCNN, images),
    Case("gpt", "clean causal transformer", "", _gpt(True), tokens, CAUSAL),
    Case("tied-gpt", "input and output embeddings tied", "", TiedGPT, tokens, CAUSAL),
    Case("spatial-attention", "SAGAN-style attention over positions", "", AttentionCNN, images),
    Case(
        "fourier-features", "a fixed random projection kept as a buffer", "", FourierFeatures, feats
    ),
    Case("residual-mlp", "pre-norm residual blocks", "", ResidualMLP, feats),
    Case("own-loss-gpt", "a GPT computing its own loss", "", OwnLossGPT, tokens, CAUSAL),
]

BUGGY: list[Case] = [
    Case("time-major-reshape", "(T, B, D) flattened as (B, T*D)", "batch-independence",
         TimeMajorReshape, seq_feats),
    Case("softmax-over-batch", "log_softmax(dim=0) over the batch", "batch-independence",
         SoftmaxOverBatch, feats),
    Case("bn-no-running-stats", "BatchNorm(track_running_stats=False) mixes in eval",
         "batch-independence", NoRunningStats, feats),
    Case("missing-causal-mask", "attention without a causal mask", "causal-leak",
         _gpt(False), tokens, CAUSAL),
    Case("off-by-one-mask", "triu(diagonal=2) lets t see t+1", "causal-leak",
         _gpt(True, 2), tokens, CAUSAL),
    Case("unused-layer", "a layer built but never called", "grad-flow", UnusedLayer, feats),
    Case("detached-branch", "a branch output .detach()ed", "grad-flow", DetachedBranch, feats),
    Case("functional-dropout", "F.dropout without training=", "eval-determinism",
         FunctionalDropout, feats),
    Case("carried-state", "state kept on self across calls", "eval-determinism",
         CarriedState, feats),
    Case("per-sample-batchnorm", "BatchNorm on a batch of 1 in a per-sample loop",
         "train-eval-gap", PerSampleBatchNorm, images),
    Case("keep-prob-dropout", "Dropout(0.9) meant as keep_prob", "train-eval-gap",
         KeepProbDropout, feats),
    Case("exploding-init", "normal_(std=3) weights", "init-loss", ExplodingInit, feats),
    Case("softmax-then-ce", "softmax output fed to cross-entropy", "overfit-batch",
         SoftmaxThenCE, feats),
    Case("frozen-by-accident", "requires_grad=False left on a layer", "param-update",
         FrozenByAccident, feats),
    Case("log-of-negative", "log of a Linear output", "nan-inf", LogOfNegative, feats),
    Case("sqrt-at-zero", "sqrt of a zero-initialized norm", "nan-inf", SqrtAtZero, feats),
    Case("deep-sigmoid", "12 sigmoid layers, vanishing gradients", "grad-scale",
         DeepSigmoid, feats),
    Case("negative-bias", "bias init -5 before ReLU", "dead-units", NegativeBias, feats),
    Case("numpy-noise", "np.random noise in forward", "determinism", NumpyNoise, feats),
    Case("expanded-distance", "|a|^2+|b|^2-2ab distances under bf16", "amp-drift",
         PrototypeDistance, feats),
    Case("fixed-device-tensor", "torch.zeros(..., device='cpu') in forward",
         "device-consistency", FixedDeviceTensor, feats),
    Case("plain-list-layers", "layers in a Python list", "device-consistency",
         PlainListLayers, feats),
    Case("plain-tensor-mask", "tensor attribute instead of a buffer", "device-consistency",
         PlainTensorMask, feats),
    Case("data-dependent-branch", "if x.mean() > 0 in forward", "exportable",
         DataDependentBranch, feats),
    Case("buffer-weight", "a weight registered as a buffer", "wiring", BufferWeight, feats),
    Case("residual-twice", "the residual added twice in each block", "wiring",
         lambda: ResidualMLP(twice=True), feats),
    Case("attention-wrong-axis", "spatial attention softmax over the queries", "wiring",
         lambda: AttentionCNN(axis=1), images),
    Case("copied-tie", "output embedding a copy of the input one, not tied", "wiring",
         CopiedTieGPT, tokens, CAUSAL),
    Case("own-loss-wrong-axis", "the model's own loss log_softmax over time", "init-loss",
         lambda: OwnLossGPT(dim=1), tokens, CAUSAL),
]  # fmt: skip


def build(case: Case) -> tuple[nn.Module, Any]:
    torch.manual_seed(0)  # the same weights every run
    return case.build(), case.inputs()
