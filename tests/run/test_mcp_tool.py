"""The MCP ``run_script`` tool: ``torchwise run`` for agents, confined to the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra (pip install 'torchwise[mcp]')")

from mcp import Client
from torchwise.mcp.run_tool import RunResult
from torchwise.mcp.server import build_server

SCRIPT = """\
import torch
from torch import nn

model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(50):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
print("done training")
"""


def _call(server: Any, arguments: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with Client(server) as client:
            return await client.call_tool("run_script", arguments)

    return anyio.run(main)


@pytest.mark.slow
def test_run_script_proves_the_bug_and_stays_in_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "train.py").write_text(SCRIPT)
    (tmp_path / "outside.py").write_text(SCRIPT)
    server = build_server(workspace, time_limit=240)
    result = _call(server, {"script": "train.py", "steps": 3})
    assert not result.is_error, result.content
    run = RunResult.model_validate(result.structured_content)
    assert [(f.code, f.path, f.line) for f in run.findings] == [("TWR101", "train.py", 8)]
    assert run.steps == 6 and "done training" not in run.output_tail  # 3 steps x 2 "epochs"
    refused = _call(server, {"script": "../outside.py"})
    assert refused.is_error and "outside the workspace" in str(refused.content)
