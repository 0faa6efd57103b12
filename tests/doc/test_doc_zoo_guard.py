"""`doc --write` never edits torchwise's own installed source."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torchwise.zoo


def test_write_on_a_zoo_model_is_refused_and_touches_nothing() -> None:
    zoo_dir = Path(torchwise.zoo.__file__).parent
    before = {path: path.read_bytes() for path in zoo_dir.glob("*.py")}
    result = subprocess.run(
        [sys.executable, "-m", "torchwise", "doc", "zoo:resnet18", "--write"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "built-in reference model" in result.stderr
    assert "Traceback" not in result.stderr
    assert {path: path.read_bytes() for path in zoo_dir.glob("*.py")} == before
