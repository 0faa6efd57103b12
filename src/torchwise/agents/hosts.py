"""Where each coding agent host keeps its MCP configuration and its agent definitions.

- **Claude Code**: ``.mcp.json`` (``mcpServers``) and ``.claude/agents/<name>.md`` with
  YAML front matter ``name``, ``description``, ``tools``; MCP tools are named
  ``mcp__<server>__<tool>``.
- **Cursor**: ``.cursor/mcp.json`` (``mcpServers``) and ``.cursor/rules/<name>.mdc``
  rules with ``description``, ``globs`` and ``alwaysApply: false`` (the agent
  attaches a rule when its description fits the request).
- **VS Code** (Copilot custom agents): ``.vscode/mcp.json`` (``servers``) and
  ``.github/agents/<name>.agent.md`` with ``name``, ``description``, ``tools``;
  MCP tools are named ``<server>/<tool>``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from torchwise.agents.roles import Role

SERVER_NAME = "torchwise"

#: Host ability -> the host's own tool names for it.
_CLAUDE_TOOLS = {
    "read": ("Read",),
    "search": ("Grep", "Glob"),
    "edit": ("Edit", "Write"),
    "run": ("Bash",),
}
_VSCODE_TOOLS = {
    "read": ("search",),
    "search": ("search",),
    "edit": ("edit",),
    "run": ("runCommands",),
}


@dataclass(frozen=True)
class Host:
    name: str
    label: str
    mcp_config: str  # path of the MCP config, relative to the project root
    servers_key: str  # the config's table of servers
    root_argument: str  # how the config names the workspace root for `torchwise mcp --root`
    agents_dir: str
    suffix: str

    def agent_path(self, role: Role) -> str:
        return f"{self.agents_dir}/{role.name}{self.suffix}"

    def tool_name(self, tool: str) -> str:
        if self.name == "claude":
            return f"mcp__{SERVER_NAME}__{tool}"
        if self.name == "vscode":
            return f"{SERVER_NAME}/{tool}"
        return tool

    def tools(self, role: Role) -> list[str]:
        """The host tool names a role may use: its own abilities, then our MCP tools."""
        table = _CLAUDE_TOOLS if self.name == "claude" else _VSCODE_TOOLS
        names: list[str] = []
        for ability in role.host_tools:
            for name in table.get(ability, ()):
                if name not in names:
                    names.append(name)
        return names + [self.tool_name(tool) for tool in role.tools]

    def front_matter(self, role: Role) -> list[tuple[str, str]]:
        """The keys torchwise owns, as (key, YAML value) pairs, in order."""
        description = _yaml_string(role.description)
        if self.name == "claude":
            return [
                ("name", role.name),
                ("description", description),
                ("tools", ", ".join(self.tools(role))),
            ]
        if self.name == "cursor":
            return [("description", description), ("globs", ""), ("alwaysApply", "false")]
        listed = ", ".join(_yaml_string(tool) for tool in self.tools(role))
        return [("name", role.name), ("description", description), ("tools", f"[{listed}]")]

    def server_entry(self, command: Sequence[str]) -> dict[str, object]:
        entry: dict[str, object] = {}
        if self.name in ("claude", "vscode"):
            entry["type"] = "stdio"
        entry["command"] = command[0]
        entry["args"] = [*command[1:], "mcp", "--root", self.root_argument]
        return entry


def _yaml_string(text: str) -> str:
    """A double-quoted YAML scalar (JSON string syntax is valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


HOSTS: dict[str, Host] = {
    "claude": Host(
        "claude", "Claude Code", ".mcp.json", "mcpServers", ".", ".claude/agents", ".md"
    ),
    "cursor": Host(
        "cursor",
        "Cursor",
        ".cursor/mcp.json",
        "mcpServers",
        "${workspaceFolder}",
        ".cursor/rules",
        ".mdc",
    ),
    "vscode": Host(
        "vscode",
        "VS Code",
        ".vscode/mcp.json",
        "servers",
        "${workspaceFolder}",
        ".github/agents",
        ".agent.md",
    ),
}
