"""A workspace for the MCP tests: a copy of the example project plus two checkpoints."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cifar_project"
#: A pickle whose unpickling would call os.system: written as bytes, never loaded.
EVIL_PICKLE = b"cposix\nsystem\n(S'touch /tmp/torchwise-pwned'\ntR."


def make_workspace(root: Path) -> Path:
    import torch

    shutil.copytree(EXAMPLE, root)
    (root / "ckpt").mkdir()
    torch.manual_seed(0)
    state = {
        "weight": torch.randn(4, 3),
        "bias": torch.zeros(4),
        "bn.running_mean": torch.zeros(4),
    }
    torch.save(state, root / "ckpt" / "good.pt")
    (root / "ckpt" / "evil.pt").write_bytes(EVIL_PICKLE)
    return root


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            stat = path.lstat()
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture
def tree_snapshot() -> Callable[[Path], dict[str, tuple[int, int]]]:
    """Every file under a root with its size and mtime: equal snapshots, nothing written."""
    return snapshot


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("mcp") / "project")
