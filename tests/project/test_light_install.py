"""Without the optional packages: what still works, and what says what to install."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_WITHOUT = textwrap.dedent(
    """
    import importlib.abc, importlib.util, sys

    BLOCKED = tuple(sys.argv[1].split(","))

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    # As when not installed: looking the package up finds nothing (deps.require).
    real_find_spec = importlib.util.find_spec
    importlib.util.find_spec = lambda name, package=None: (
        None if name.split(".")[0] in BLOCKED else real_find_spec(name, package)
    )
    from torchwise.cli import main
    main(sys.argv[2:])
    """
)


def without(blocked: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """torchwise in an interpreter where the ``blocked`` packages cannot be imported."""
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, blocked, *args],
        capture_output=True, text=True, cwd=cwd, check=False, timeout=600,
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text(
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = torch.nn.Linear(4, 2)\n"
    )
    (tmp_path / "train.py").write_text("import torch\nstate = torch.load('m.pt')\n")
    return tmp_path


def test_project_without_torch_is_a_static_audit(project: Path) -> None:
    result = without("torch,safetensors", "project", ".", "--format", "json", cwd=project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["models"] == [] and report["review"]["by_family"]["security"]["warning"] == 1
    assert any("PyTorch is not installed" in note for note in report["notes"])
    assert report["knowledge"]["torch"]["note"].startswith("torch is not installed")


@pytest.mark.parametrize(
    ("blocked", "args", "message"),
    [
        ("mcp", ["mcp"], "torchwise mcp needs mcp, which is not installed: "
         "pip install mcp (or pip install 'torchwise[mcp]')"),
        ("jinja2", ["project", ".", "--format", "html", "--no-import"],
         "torchwise project --format html needs jinja2, which is not installed: "
         "pip install jinja2 (or pip install 'torchwise[project]')"),
        ("pydantic", ["agents", "install"], "torchwise agents install needs pydantic, which is "
         "not installed: pip install pydantic (or pip install 'torchwise[project]')"),
    ],
)  # fmt: skip
def test_a_missing_extra_is_named(
    project: Path, blocked: str, args: list[str], message: str
) -> None:
    result = without(blocked, *args, cwd=project)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == f"error: {message}"
