"""Tiny real workloads for tune's tests: steps of a millisecond on a CPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchwise.tune.api import build_workload
from torchwise.tune.options import TuneOptions
from torchwise.tune.step import Workload


@pytest.fixture(autouse=True)
def one_thread():  # type: ignore[no-untyped-def]
    """One intra-op thread: on a busy 2-core machine running 2 test workers, two
    OpenMP threads per worker make millisecond ops take 30 ms at barriers."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn(self.conv(x)))  # (B, 8, H, W)
        return self.head(h.mean(dim=(2, 3)))  # (B, 4)


class Block(nn.Module):
    def __init__(self, dim: int, p: float = 0.0) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(self.fc(self.norm(x)))


class TinyMLP(nn.Module):
    def __init__(self, dim: int = 16, p: float = 0.0) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, p) for _ in range(3)])
        self.out = nn.Linear(dim, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def workload(model: nn.Module, x: torch.Tensor, **options: object) -> Workload:
    wl, _ = build_workload(
        model,
        x,
        None,
        None,
        None,
        TuneOptions(**options),
        torch.device("cpu"),  # type: ignore[arg-type]
        type(model).__name__,
    )
    return wl


@pytest.fixture
def cnn_workload() -> Workload:
    torch.manual_seed(0)
    return workload(TinyCNN(), torch.randn(4, 3, 8, 8))


@pytest.fixture
def mlp_workload() -> Workload:
    torch.manual_seed(0)
    return workload(TinyMLP(), torch.randn(8, 16))
