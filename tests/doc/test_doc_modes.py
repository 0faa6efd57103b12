"""What differs between train() and eval(), and the generated Attributes/Args entries."""

from __future__ import annotations

import torch
from torch import nn

from torchwise.doc.docstrings import GenEntry
from torchwise.doc.generate import attribute_entries, init_entries
from torchwise.doc.modes import mode_differences


class Noisy(nn.Module):
    """Mentions self.training in its docstring only: that is not a branch."""

    def __init__(self, dim: int = 4, *, scale: float = 0.5, act: type = nn.ReLU) -> None:
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, dim))
        self.register_buffer("steps", torch.zeros(3, dtype=torch.int64))
        self.norm = nn.BatchNorm1d(dim)
        self.off = nn.Dropout(0.0)  # p=0: no difference at all
        self.lstm = nn.LSTM(dim, dim, num_layers=2, dropout=0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.cls_token)


class Branchy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 if self.training else x


class Attention(nn.Module):
    """nanoGPT's pattern: the dropout probability is chosen by mode."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.dropout = dropout

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        p = self.dropout if self.training else 0
        out = torch.nn.functional.scaled_dot_product_attention(
            q, q, q, dropout_p=self.dropout if self.training else 0.0
        )
        if self.training:
            out = out * 1.0
        return torch.nn.functional.dropout(out, p, training=self.training)


def test_mode_differences_name_the_modules_and_ignore_prose_and_p0() -> None:
    lines = mode_differences(Noisy())
    text = "\n".join(lines)
    assert "Normalisation (``norm``)" in text
    assert "Recurrent dropout (``lstm``)" in text
    assert "off" not in text and "Noisy" not in text
    assert mode_differences(Branchy()) == [
        "- Branchy (``Branchy``): ``x * 2 if self.training else x`` (test_doc_modes.py:30)."
    ]
    assert mode_differences(nn.Linear(2, 2)) == []  # nothing differs: the section is left out


def test_self_training_branches_say_what_changes_or_nothing() -> None:
    model = nn.Sequential(Attention(0.1), Attention(0.0))
    lines = mode_differences(model)
    assert "- Attention (``0``): ``p=0.1`` in train, ``p=0`` in eval." in lines
    assert "- Attention (``0``): ``dropout_p=0.1`` in train, ``dropout_p=0.0`` in eval." in lines
    # Attention(0.0) ("1") is in neither line above: its branches change nothing. The
    # `if` statement and the dropout on a local p cannot be evaluated: shown for both.
    assert any(
        line.startswith("- Attention (``0``, ``1``): ``self.training`` (test_doc_modes.py:")
        for line in lines
    )
    assert any("dropout`` drops activations with p=``p`` in train only" in line for line in lines)


def test_entries_from_the_signature_and_the_module_tree() -> None:
    assert init_entries(Noisy) == [
        GenEntry("dim", "int, default=4"),
        GenEntry("scale", "float, default=0.5"),
        GenEntry("act", "type, default=ReLU"),
    ]
    entries = {e.name: e.type for e in attribute_entries(Noisy())}
    assert entries["cls_token"] == "Parameter[float32, (1, 4)]"
    assert entries["steps"] == "buffer[int64, (3,)]"
    # 2 layers x (4 gates x 4 hidden x (4 in + 4 hidden) + 2 biases x 16) = 2 x 160
    assert entries["lstm"] == "LSTM(4, 4, num_layers=2, dropout=0.2), 320 params"
    # a repr that would push the line past ~100 columns is shortened to the type
    assert entries["norm"] == "BatchNorm1d, 8 params"
