"""Where each coding agent host keeps its MCP configuration and its agent definitions.

Each format follows the host's own documentation (checked in ``tests/agents``):

- **Claude Code** (code.claude.com/docs/en/sub-agents, /mcp): ``.mcp.json``
  (``mcpServers``, ``type: stdio``) and subagents in ``.claude/agents/<name>.md``
  with YAML front matter ``name``, ``description`` and ``tools`` (a comma-separated
  string); MCP tools are named ``mcp__<server>__<tool>``.
- **Cursor** (cursor.com/docs/agent/subagents, /context/mcp): ``.cursor/mcp.json``
  (``mcpServers``) and subagents in ``.cursor/agents/<name>.md`` with ``name`` and
  ``description`` (Cursor's subagents have no tool list: they use the parent's tools,
  MCP servers included). Cursor replaced the rules (``.cursor/rules/*.mdc``) that
  earlier versions of torchwise wrote.
- **VS Code** (code.visualstudio.com/docs/agent-customization/custom-agents,
  /agents/reference/tools-reference): ``.vscode/mcp.json`` (``servers``, ``type:
  stdio``) and custom agents in ``.github/agents/<name>.agent.md`` with ``name``,
  ``description`` and ``tools`` (a list of tool sets, ``read``, ``search``, ``edit``,
  ``execute``, and MCP tools named ``<server>/<tool>``).

The configs start the server with a portable command (``torchwise mcp``), never this
machine's interpreter path: they are meant to be committed.
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
    "read": ("read",),
    "search": ("search",),
    "edit": ("edit",),
    "run": ("execute",),
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

    @property
    def legacy_agents(self) -> tuple[str, str] | None:
        """Where an earlier torchwise wrote this host's definitions (directory, suffix)."""
        return (".cursor/rules", ".mdc") if self.name == "cursor" else None

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
            return [("name", role.name), ("description", description)]
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
        ".cursor/agents",
        ".md",
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
