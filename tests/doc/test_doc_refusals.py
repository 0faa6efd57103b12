"""`torchwise doc` refuses what cannot work before measuring, in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from torchwise.cli import app

MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)
"""


def test_write_and_check_together_are_refused(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    result = CliRunner().invoke(
        app, ["doc", f"{tmp_path / 'model.py'}:Net", "-i", "f32[2,6]", "--write", "--check"]
    )
    assert result.exit_code == 2
    assert "--write and --check cannot be combined" in result.output


def test_an_unwritable_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchwise.doc import source

    def refused(path: Path, data: bytes) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(source, "write_atomic", refused)
    (tmp_path / "model.py").write_text(MODEL)
    result = CliRunner().invoke(app, ["doc", f"{tmp_path / 'model.py'}:Net", "-i", "f32[2,6]",
                                      "--write"])  # fmt: skip
    assert result.exit_code == 2
    assert "error: cannot write" in result.output and "Permission denied" in result.output
    assert "internal error" not in result.output


def test_the_example_rebuilds_any_build_expression(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    result = CliRunner().invoke(app, [
        "doc", str(tmp_path / "model.py"), "--build", "nn.Sequential(Net(), nn.ReLU())",
        "-i", "f32[2,6]",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert ">>> from torch import nn" in result.output
    assert ">>> from model import Net" in result.output
    assert ">>> model = nn.Sequential(Net(), nn.ReLU()).eval()" in result.output
