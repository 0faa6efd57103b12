"""overfit-batch: made-up targets the model can reach, and stuck told from slow.

Minimal reproductions of what failed on real models: a small fully convolutional
super-resolution net (conv + PixelShuffle) trained towards per-pixel noise, and a
recurrent language model whose loss was still falling when a short budget ran out.
"""

from __future__ import annotations

import torch
from torch import nn

from torchwise.doctor import Status, check
from torchwise.doctor.checks.overfit_batch import LABELS, TWIN, OverfitBatch, OverfitM


class PixelShuffleNet(nn.Module):
    """Conv layers and a sub-pixel upscale, the shape of a super-resolution net."""

    def __init__(self, upscale: int = 3) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, upscale**2, 3, padding=1),
        )  # fmt: skip
        self.shuffle = nn.PixelShuffle(upscale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shuffle(self.body(x))


def test_dense_output_without_labels_is_not_failed() -> None:
    torch.manual_seed(0)
    result = check(PixelShuffleNet(), torch.randn(4, 1, 16, 16), ["overfit-batch"])
    overfit = result["overfit-batch"]
    assert overfit.status is Status.PASS, overfit.summary
    assert overfit.evidence["target"] == TWIN
    assert "re-initialised copy" in overfit.summary


def test_given_targets_are_kept() -> None:
    torch.manual_seed(0)
    target = torch.randn(4, 1, 48, 48)
    result = check(PixelShuffleNet(), torch.randn(4, 1, 16, 16), ["overfit-batch"], target=target)
    assert result["overfit-batch"].evidence["target"] == LABELS


def _judge(losses: list[float], budget: int) -> Status:
    return OverfitBatch().judge(OverfitM(losses, 0.1 * losses[0], budget, 1e-2, LABELS)).status


def test_a_loss_still_falling_when_the_budget_ends_warns() -> None:
    # an LSTM language model at 60 steps: 3.91 -> 2.28 and still going down
    falling = [3.91 - 0.0276 * i for i in range(60)]
    assert _judge(falling, 60) is Status.WARN


def test_a_loss_that_stalls_before_halving_fails() -> None:
    # softmax before cross-entropy: a floor at 57% of the start
    stalled = [1.6, 1.2, 1.0, *[0.91] * 57]
    assert _judge(stalled, 60) is Status.FAIL


def test_a_diverged_loss_fails() -> None:
    assert _judge([1.0, 5.0, float("nan")], 60) is Status.FAIL
