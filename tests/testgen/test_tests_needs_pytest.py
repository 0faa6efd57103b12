"""`torchwise tests` without pytest says pytest is missing, not that the model failed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from torchwise.cli import app


def test_missing_pytest_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "pytest" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    (tmp_path / "model.py").write_text(
        "from torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n"
    )
    result = CliRunner().invoke(
        app, ["tests", f"{tmp_path / 'model.py'}:Net", "-i", "f32[2,4]", "-o", "t.py"]
    )
    assert result.exit_code == 2
    assert "needs pytest, which is not installed" in result.output
