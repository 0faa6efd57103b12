"""summarize() takes inputs as torchinfo users write them, and measures models whose
training backward has no meta kernel by falling back to real tensors."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchwise.model import summarize


def test_a_bare_tensor_is_the_one_argument() -> None:
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
    bare = summarize(model, torch.randn(3, 6))
    tupled = summarize(model, (torch.randn(3, 6),))
    assert bare.total_params == tupled.total_params == 38
    assert bare.output_shapes == [(3, 2)]


class _NonzeroInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        keep = torch.zeros_like(grad)
        index = (x > 0).nonzero()  # needs values: no meta kernel
        keep[tuple(index.T)] = 1.0
        return grad * 2 * keep


class BackwardNeedsValues(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _NonzeroInBackward.apply(self.fc(x))


def test_a_training_backward_without_meta_kernels_falls_back() -> None:
    summary = summarize(BackwardNeedsValues(), torch.randn(3, 6))
    assert summary.total_params == 28
    assert summary.training is not None
    assert any("meta-device forward failed" in note for note in summary.notes)
