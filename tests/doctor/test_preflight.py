"""Options that cannot apply to the batch are refused before the model runs once, and
labels laid out as real models lay them out are accepted (doctor.preflight)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchwise.doctor import Options, check, validate_options
from torchwise.errors import TorchwiseError


class Counting(nn.Module):
    """A classifier that counts its forwards: a refusal must come before the first."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.fc(x)


class TimeFirst(nn.Module):
    """(T, B) tokens -> (T, B, V) logits, as pytorch/examples' word language model."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(7, 8)
        self.rnn = nn.GRU(8, 8)
        self.out = nn.Linear(8, 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.rnn(self.emb(x))[0])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"loss": "bogus"}, "is not one of auto, ce, mse, bce"),
        ({"loss": "no_such_module_here:fn"}, "cannot load loss"),
        ({"causal_dim": 2}, "--causal 2 is beyond the inputs' dims"),
        ({"batch_dim": 2}, "needs an input tensor with a batch dim (dim 2"),
        ({"target": torch.zeros(3, dtype=torch.long)}, "cannot label the input's 2 samples"),
    ],
)
def test_a_bad_option_is_refused_before_any_forward(options: dict, message: str) -> None:
    model = Counting()
    with pytest.raises(TorchwiseError, match=message.replace("(", r"\(")):
        check(model, torch.randn(2, 4), ["nan-inf"], **options)
    assert model.calls == 0


@pytest.mark.parametrize(
    ("labels", "batch_dim"),
    [
        (torch.zeros(2, dtype=torch.long), 0),  # (B,) class indices
        (torch.zeros(2, 5, dtype=torch.long), 0),  # (B, T) per token
        (torch.zeros(10, dtype=torch.long), 0),  # (B*T,) flattened positions
        (torch.zeros(5, 2, dtype=torch.long), 1),  # time-first (T, B)
        (torch.tensor(0.5), 0),  # a scalar target has no batch to compare
    ],
)
def test_labels_that_hold_the_batch_pass(labels: torch.Tensor, batch_dim: int) -> None:
    inputs = torch.zeros(5, 2) if batch_dim == 1 else torch.zeros(2, 5)
    validate_options(Options(target=labels, batch_dim=batch_dim), (inputs,), {})


def test_time_first_labels_fit_a_time_first_model() -> None:
    """(T, B) labels for (T, B, V) logits: the labels' batch sits at the inputs' batch dim."""
    tokens = torch.randint(0, 7, (5, 3))
    labels = torch.randint(0, 7, (5, 3))
    report = check(TimeFirst(), tokens, ["init-loss"], batch_dim=1, target=labels)
    assert report["init-loss"].status.value == "pass", report["init-loss"].summary


def test_no_batch_dim_skips_the_label_batch() -> None:
    """A graph (batch_dim=None) has no samples to count: any labels may pass here."""
    validate_options(Options(target=torch.zeros(3), batch_dim=None), (torch.zeros(5, 4),), {})
