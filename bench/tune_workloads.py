"""The three workloads of bench/tune_accuracy.py: a conv net, a transformer, an MLP with a
slow loader.

Each is sized so that one step takes a few to a few tens of milliseconds on one core
(the exhaustive sweep times 24-96 combinations of it, 30 rounds each):

- **conv**: ``CifarNet`` from examples/cifar_project (a residual CNN, 3 stages), width 8,
  a batch of 8 3x32x32 images, cross-entropy over 10 classes.
- **transformer**: torchwise's zoo LLaMA at its tiny configuration (2 layers, RMSNorm,
  rotary grouped-query attention, SwiGLU; 124k parameters), 4 sequences of 32 tokens,
  next-token cross-entropy over 256.
- **mlp-slow-loader**: a 3-layer MLP on 128 features fed by a DataLoader whose
  collate function waits 20 ms per batch of 32 (standing in for reading and decoding
  a batch from a network disk, I/O-bound): the step is input-bound with the default
  ``num_workers=0``, and worker processes hide the wait.
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
from torch.utils.data import DataLoader, Dataset, default_collate

from torchwise.tune.api import build_workload
from torchwise.tune.loader import LoaderSource
from torchwise.tune.options import TuneOptions
from torchwise.tune.step import Workload as StepWorkload

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
    return CifarNet(width=8, dropout=0.0)


def _llama() -> nn.Module:
    from torchwise import zoo

    torch.manual_seed(0)
    return zoo.get("llama-tiny").build(device="cpu")


class MLP(nn.Module):
    def __init__(self, features: int = 128, hidden: int = 256, classes: int = 10) -> None:
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


class Features(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """1024 random 128-feature samples with labels over 10 classes."""

    def __init__(self, size: int = 1024) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, 128, generator=generator)
        self.y = torch.randint(0, 10, (size,), generator=generator)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]


#: The wait per batch: the I/O a real loader spends on one batch (not CPU work,
#: so worker processes overlap it even on a busy 2-core machine).
BATCH_DELAY_S = 0.020


def slow_collate(samples: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    time.sleep(BATCH_DELAY_S)
    return default_collate(samples)


def make_slow_loader() -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    return DataLoader(Features(), batch_size=32, shuffle=True, collate_fn=slow_collate)


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return MLP()


WORKLOADS = {
    "conv": Workload("conv", _cifarnet, lambda: torch.randn(8, 3, 32, 32)),
    "transformer": Workload("transformer", _llama, lambda: torch.randint(0, 256, (4, 32))),
    "mlp-slow-loader": Workload(
        "mlp-slow-loader", _mlp, lambda: None, loader=f"{__file__}:make_slow_loader"
    ),
}


def step_workload(spec: Workload, source: LoaderSource | None) -> StepWorkload:
    """``spec`` as tune builds it on the CPU (AdamW, the loss it picks), to time steps directly."""
    workload, _ = build_workload(
        spec.build(),
        spec.inputs(),
        None,
        None,
        source,
        TuneOptions(),
        torch.device("cpu"),
        spec.name,
    )
    return workload
