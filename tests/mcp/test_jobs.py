"""The MCP tools' work functions in a worker, on inputs the in-process tests do not cover."""

from __future__ import annotations

from pathlib import Path

from torchwise.mcp import jobs
from torchwise.project.isolation import run_isolated


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
