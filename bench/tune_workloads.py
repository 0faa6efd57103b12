"""The three workloads of bench/tune_accuracy.py: a conv net, a transformer, an MLP with a
slow loader.

- **conv**: ``CifarNet`` from examples/cifar_project (a residual CNN, 3 stages), width 16,
  a batch of 32 3x32x32 images, cross-entropy over 10 classes.
- **transformer**: torchwise's zoo LLaMA at its tiny configuration (RMSNorm, rotary
  attention, SwiGLU; 124k parameters), 8 sequences of 64 tokens, next-token
  cross-entropy over 256.
- **mlp-slow-loader**: a 3-layer MLP on 256 features fed by a DataLoader whose dataset
  spends 1 ms per sample in ``__getitem__`` (standing in for reading and decoding a
  file, I/O-bound), 32 samples a batch: the step is input-bound with the default
  ``num_workers=0``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Workload:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], Any]
    loader: str | None = None


def _cifarnet() -> nn.Module:
    sys.path.insert(0, str(ROOT / "examples" / "cifar_project"))
    try:
        from model import CifarNet  # the example project's own model
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    return CifarNet(width=16, dropout=0.0)


def _llama() -> nn.Module:
    from torchwise import zoo

    torch.manual_seed(0)
    return zoo.get("llama-tiny").build(device="cpu")


class MLP(nn.Module):
    def __init__(self, features: int = 256, hidden: int = 512, classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (B, classes)


class SlowFeatures(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """1 ms of waiting per sample, like reading a small file from a network disk."""

    def __init__(self, size: int = 1024, delay_s: float = 0.001) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, 256, generator=generator)
        self.y = torch.randint(0, 10, (size,), generator=generator)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay_s)
        return self.x[index], self.y[index]


def make_slow_loader() -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    return DataLoader(SlowFeatures(), batch_size=32, shuffle=True)


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return MLP()


WORKLOADS = {
    "conv": Workload("conv", _cifarnet, lambda: torch.randn(32, 3, 32, 32)),
    "transformer": Workload("transformer", _llama, lambda: torch.randint(0, 256, (8, 64))),
    "mlp-slow-loader": Workload(
        "mlp-slow-loader", _mlp, lambda: None, loader=f"{__file__}:make_slow_loader"
    ),
}
