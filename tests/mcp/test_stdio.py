"""``torchwise mcp`` as a host starts it: a subprocess speaking MCP over stdin/stdout."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra (pip install 'torchwise[mcp]')")

from mcp import Client, StdioServerParameters
from torchwise.agents.roles import TOOLS


@pytest.mark.slow
def test_torchwise_mcp_serves_over_stdio(workspace: Path) -> None:
    # A model file that prints at import: its output must not corrupt the protocol.
    (workspace / "noisy.py").write_text(
        "import torch.nn as nn\nprint('hello from an import')\n"
        "class Noisy(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(4, 2)\n    def forward(self, x):\n        return self.fc(x)\n"
    )
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "torchwise", "mcp", "--root", str(workspace), "--time-limit", "240"],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )

    async def session() -> tuple[set[str], dict[str, object], dict[str, object], bool]:
        async with Client(parameters, read_timeout_seconds=300) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            rule = await client.call_tool("explain_rule", {"code": "TW101"})
            review = await client.call_tool("review", {"paths": ["train.py"]})
            measured = await client.call_tool(
                "inspect_model", {"target": "noisy.py:Noisy", "inputs": ["f32[3,4]"]}
            )
            outside = await client.call_tool("review", {"paths": ["/"]})
            assert rule.structured_content and review.structured_content
            assert measured.structured_content, measured.content
            return tools, review.structured_content, measured.structured_content, outside.is_error

    tools, review, measured, refused = anyio.run(session)
    assert tools == set(TOOLS)
    assert review["by_severity"]["error"] >= 2  # type: ignore[index]
    assert measured["outputs"] == [[3, 2]] and measured["total_params"] == 4 * 2 + 2
    assert refused
