"""The dead-code scan of src/ finds nothing (issue 27).

vulture reads the tree (it imports nothing); registration decorators, the review
engine's hooks and tests/dead_code_whitelist.py tell it what frameworks call.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REGISTERING = ",".join(
    ("@rule", "@opcode", "@check", "@register", "@attention_part", "@click.command",
     "@click.group", "@*.command")
)  # fmt: skip
HOOKS = "leave_*,visit_*,enter_*"


def test_vulture_finds_no_dead_code() -> None:
    pytest.importorskip("vulture", reason="vulture is a dev dependency (pip install -e '.[dev]')")
    command = [
        sys.executable, "-m", "vulture", "src/torchwise", "tests/dead_code_whitelist.py",
        "--min-confidence", "60", "--ignore-decorators", REGISTERING, "--ignore-names", HOOKS,
    ]  # fmt: skip
    result = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.stdout == "", "dead code (delete it, or whitelist a framework's use):\n" + (
        result.stdout
    )
