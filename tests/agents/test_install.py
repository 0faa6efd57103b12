"""``torchwise agents install``: valid definitions, real tool names, true project knowledge,
and re-runs that touch only what torchwise generated."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from torchwise.agents.hosts import HOSTS
from torchwise.agents.roles import ROLES, TOOLS
from torchwise.cli import app
from torchwise.project import ProjectKnowledge, knowledge_markdown

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cifar_project"
BLOCK = re.compile(
    r"<!-- torchwise:begin (?P<name>[\w-]+)[^>]*-->\n(?P<text>.*?)\n"
    r"<!-- torchwise:end (?P=name) -->",
    re.S,
)


def install(root: Path, *args: str) -> Any:
    result = CliRunner().invoke(app, ["agents", "install", "--root", str(root), *args])
    return result


def front_matter(path: Path) -> dict[str, Any]:
    text = path.read_text()
    assert text.startswith("---\n")
    data = yaml.safe_load(text[4 : text.index("\n---\n", 4)])
    assert isinstance(data, dict)
    return data


def blocks(path: Path) -> dict[str, str]:
    return {m.group("name"): m.group("text") for m in BLOCK.finditer(path.read_text())}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "cifar_project"
    shutil.copytree(EXAMPLE, root)
    return root


def server_tools() -> set[str]:
    pytest.importorskip("mcp", reason="checking tool names needs the mcp extra")
    import anyio

    from torchwise.mcp.server import build_server

    server = build_server(EXAMPLE)
    return {tool.name for tool in anyio.run(server.list_tools)}


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with a `torchwise` on it (as after `pip install`, `pipx` or `uv tool`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable = bin_dir / "torchwise"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


# Each host's format, as its documentation gives it:
# - Claude Code subagents, https://code.claude.com/docs/en/sub-agents: `name` (lowercase
#   letters and hyphens) and `description` required; `tools` a comma-separated string of
#   tool names (Read, Grep, Glob, Edit, Write, Bash, ...; MCP tools mcp__<server>__<tool>);
#   other documented keys: model, disallowedTools, permissionMode, ... (the user's own).
# - Claude Code .mcp.json, https://code.claude.com/docs/en/mcp: mcpServers.<name> with
#   type "stdio", command, args.
# - Cursor subagents, https://cursor.com/docs/agent/subagents: .cursor/agents/<name>.md,
#   front matter name, description, model, readonly, is_background (no tool list).
# - Cursor MCP, https://cursor.com/docs/context/mcp: .cursor/mcp.json, mcpServers.<name>
#   with command and args; ${workspaceFolder} is interpolated.
# - VS Code custom agents, code.visualstudio.com/docs/agent-customization/custom-agents:
#   .github/agents/<name>.agent.md, front matter name, description, tools (a list of
#   tool sets and tools; MCP tools <server>/<tool>), model, handoffs, ...; tool sets
#   from /docs/agents/reference/tools-reference: read, search, edit, execute, web, ...
# - VS Code MCP, /docs/agents/reference/mcp-configuration: .vscode/mcp.json,
#   servers.<name> with type "stdio", command, args.
CLAUDE_HOST_TOOLS = {"Read", "Grep", "Glob", "Edit", "Write", "Bash"}
CLAUDE_KEYS = {"name", "description", "tools"}
CURSOR_KEYS = {"name", "description", "model", "readonly", "is_background"}
VSCODE_KEYS = {"name", "description", "tools", "model", "handoffs", "argument-hint", "target"}
VSCODE_TOOL_SETS = {"read", "search", "edit", "execute", "web", "agent", "todos"}


def test_claude_code_definitions(project: Path, on_path: Path) -> None:
    result = install(project)
    assert result.exit_code == 0, result.output
    known = server_tools()
    assert known == set(TOOLS)
    for role in ROLES:
        path = project / ".claude" / "agents" / f"{role.name}.md"
        meta = front_matter(path)
        assert set(meta) == CLAUDE_KEYS
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", meta["name"])
        assert meta["name"] == role.name and meta["description"] == role.description
        assert isinstance(meta["tools"], str)  # a comma-separated string, not a list
        tools = [t.strip() for t in meta["tools"].split(",")]
        ours = [t.removeprefix("mcp__torchwise__") for t in tools if t.startswith("mcp__")]
        assert ours and set(ours) <= known, set(ours) - known
        assert set(tools) - {f"mcp__torchwise__{t}" for t in ours} <= CLAUDE_HOST_TOOLS
        text = path.read_text()
        for heading in (
            "## When to use",
            "## Evidence: which tool answers what",
            "## Output format",
            "## Rules",
            "## Project knowledge",
        ):
            assert heading in text
        for rule in (
            "Minimal, surgical changes",
            "No placeholders",
            "Measure before claiming a speed-up",
        ):
            assert rule in text
    reviewer = (project / ".claude/agents/pytorch-code-reviewer.md").read_text()
    order = [
        "Summary",
        "Critical issues",
        "Performance",
        "Best practices",
        "Code quality",
        "Positive aspects",
        "Testing recommendations",
    ]
    positions = [reviewer.index(f"**{name}**") for name in order]
    assert positions == sorted(positions)
    config = json.loads((project / ".mcp.json").read_text())
    # portable: the command on the PATH, never this machine's interpreter
    assert config["mcpServers"]["torchwise"] == {
        "type": "stdio",
        "command": "torchwise",
        "args": ["mcp", "--root", "."],
    }
    assert sys.executable not in (project / ".mcp.json").read_text()


def test_vscode_and_cursor_definitions(project: Path, on_path: Path) -> None:
    assert install(project, "--host", "vscode", "--host", "cursor").exit_code == 0
    known = server_tools()
    for role in ROLES:
        meta = front_matter(project / ".github" / "agents" / f"{role.name}.agent.md")
        assert set(meta) <= VSCODE_KEYS and meta["name"] == role.name
        assert isinstance(meta["tools"], list)
        ours = [t.split("/", 1)[1] for t in meta["tools"] if t.startswith("torchwise/")]
        assert set(ours) == set(role.tools) and set(ours) <= known
        assert {t for t in meta["tools"] if "/" not in t} <= VSCODE_TOOL_SETS
        subagent = project / ".cursor" / "agents" / f"{role.name}.md"
        cursor_meta = front_matter(subagent)
        assert set(cursor_meta) <= CURSOR_KEYS
        assert cursor_meta == {"name": role.name, "description": role.description}
        assert "## Project knowledge" in subagent.read_text()
    engineer = front_matter(project / ".github/agents/pytorch-engineer.agent.md")["tools"]
    assert {"read", "search", "edit", "execute"} <= set(engineer)
    assert not (project / ".cursor" / "rules").exists()  # Cursor's subagents, not rules
    vscode = json.loads((project / ".vscode" / "mcp.json").read_text())["servers"]["torchwise"]
    assert vscode == {
        "type": "stdio",
        "command": "torchwise",
        "args": ["mcp", "--root", "${workspaceFolder}"],
    }
    cursor = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["torchwise"]
    assert cursor == {"command": "torchwise", "args": ["mcp", "--root", "${workspaceFolder}"]}


def test_without_torchwise_on_the_path_the_configs_run_python_m_torchwise(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = install(project, "--host", "claude", "--host", "cursor", "--host", "vscode")
    assert result.exit_code == 0, result.output
    assert "warning: torchwise is not on the PATH here" in result.stderr
    for config, key in ((".mcp.json", "mcpServers"), (".cursor/mcp.json", "mcpServers")):
        entry = json.loads((project / config).read_text())[key]["torchwise"]
        assert entry["command"] == "python"
        assert entry["args"][:3] == ["-m", "torchwise", "mcp"]
    for config in (".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json"):
        assert sys.executable not in (project / config).read_text()


def test_an_explicit_command_is_written_as_given(project: Path) -> None:
    assert install(project, "--command", "uvx torchwise").exit_code == 0
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["torchwise"]
    assert entry["command"] == "uvx" and entry["args"] == ["torchwise", "mcp", "--root", "."]
    unclosed = install(project, "--command", "'torchwise")
    assert unclosed.exit_code == 2
    assert unclosed.stderr.startswith('error: --command "\'torchwise": No closing quotation')


def test_the_cursor_rules_of_an_earlier_torchwise_are_retired(project: Path, on_path: Path) -> None:
    rules = project / ".cursor" / "rules"
    rules.mkdir(parents=True)
    ours = "<!-- torchwise:begin role (generated) -->\nold\n<!-- torchwise:end role -->\n"
    legacy = f'---\ndescription: "x"\nglobs:\nalwaysApply: false\n---\n\n{ours}'
    (rules / "pytorch-engineer.mdc").write_text(legacy)
    (rules / "pytorch-doc-writer.mdc").write_text(legacy + "\n## Our notes\nkeep me\n")
    (rules / "team.mdc").write_text("---\ndescription: team rule\n---\nours\n")
    result = install(project, "--host", "cursor")
    assert result.exit_code == 0, result.output
    assert "removed   .cursor/rules/pytorch-engineer.mdc" in result.output
    assert not (rules / "pytorch-engineer.mdc").exists()
    assert "kept      .cursor/rules/pytorch-doc-writer.mdc" in result.output
    assert "keep me" in (rules / "pytorch-doc-writer.mdc").read_text()
    assert "no longer reads it" in result.stderr
    assert (rules / "team.mdc").read_text() == "---\ndescription: team rule\n---\nours\n"


def test_project_knowledge_matches_torchwise_project_json(project: Path) -> None:
    assert install(project, "--host", "claude", "--host", "vscode").exit_code == 0
    result = CliRunner().invoke(
        app,
        [
            "project",
            str(project),
            "--format",
            "json",
            "--no-import",
            "--no-review",
            "--no-checkpoints",
        ],
    )
    assert result.exit_code == 0, result.output
    knowledge = ProjectKnowledge.model_validate(json.loads(result.stdout)["knowledge"])
    expected = knowledge_markdown(knowledge).strip()
    for host in ("claude", "vscode"):
        for role in ROLES:
            path = project / HOSTS[host].agent_path(role)
            assert blocks(path)["project-knowledge"] == expected
    # The facts themselves, spelled as the JSON has them.
    assert "`cifarnet`" in expected and "`train.py`" in expected
    assert f"installed {knowledge.torch.installed}" in expected


def test_rerunning_touches_only_what_torchwise_generated(project: Path) -> None:
    assert install(project).exit_code == 0
    reviewer = project / ".claude" / "agents" / "pytorch-code-reviewer.md"
    config = project / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "keep": 1}))
    original = reviewer.read_text()
    edited = (
        original.replace("---\nname:", "---\nmodel: opus\nname:", 1).replace(
            "# PyTorch code reviewer", "# Someone edited this"
        )
        + "\n## Team notes\n\nOur reviews also check the data loader seeds.\n"
    )
    reviewer.write_text(edited)
    (project / "Makefile").write_text("train:\n\tpython train.py --epochs 5\n")

    result = install(project)
    assert result.exit_code == 0, result.output
    assert "updated   .claude/agents/pytorch-code-reviewer.md" in result.output
    text = reviewer.read_text()
    assert front_matter(reviewer)["model"] == "opus"
    assert "Our reviews also check the data loader seeds." in text  # the user's section stays
    assert "# PyTorch code reviewer" in text and "Someone edited this" not in text
    assert (
        "`make train`" in blocks(reviewer)["project-knowledge"]
    )  # the knowledge followed the project
    merged = json.loads(config.read_text())
    assert merged["mcpServers"]["other"] == {"command": "x"} and merged["keep"] == 1
    assert "torchwise" in merged["mcpServers"]

    before = {p: p.stat().st_mtime_ns for p in (project / ".claude" / "agents").iterdir()}
    again = install(project)
    assert again.output.count("unchanged") == 1 + len(ROLES)
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_a_users_own_file_is_left_alone_unless_forced(project: Path) -> None:
    mine = project / ".claude" / "agents" / "pytorch-engineer.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: pytorch-engineer\n---\nMy own agent.\n")
    result = install(project)
    assert result.exit_code == 0 and "skipped   .claude/agents/pytorch-engineer.md" in result.output
    assert "not written by torchwise" in result.stderr
    assert mine.read_text() == "---\nname: pytorch-engineer\n---\nMy own agent.\n"
    assert install(project, "--force").exit_code == 0
    assert "project-knowledge" in blocks(mine)


def test_an_unparsable_mcp_config_is_not_overwritten(project: Path) -> None:
    config = project / ".mcp.json"
    config.write_text("{ // a comment\n}")
    result = install(project)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: .mcp.json is not valid JSON")
    assert config.read_text() == "{ // a comment\n}"
