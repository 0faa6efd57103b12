"""The MCP tools' work functions in a worker, on inputs the in-process tests do not cover."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchwise.isolation import run_isolated
from torchwise.mcp import jobs


def test_review_of_a_large_tree_can_use_its_own_process_pool(tmp_path: Path) -> None:
    # Review fans out over worker processes from 16 files on; the job's own process
    # must be allowed to start them.
    for index in range(16):
        (tmp_path / f"train_{index}.py").write_text(
            "import torch\nstate = torch.load('model.pt')\n"
        )
    summary = run_isolated(
        jobs.review, (tmp_path, [tmp_path], None, [], 100), cwd=tmp_path, timeout=600, what="review"
    )
    assert summary.files == 16
    assert summary.by_family["security"]["warning"] == 16


def test_a_model_tool_without_torch_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from torchwise.errors import MissingDependencyError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    with pytest.raises(MissingDependencyError) as missing:
        jobs.inspect_model("m.py:Net", [], None, None, "meta", 2, lambda *a: None)  # type: ignore[arg-type]
    assert str(missing.value).startswith("the MCP tool inspect_model needs PyTorch")
    assert missing.value.hint is not None and "download.pytorch.org/whl/cpu" in missing.value.hint
