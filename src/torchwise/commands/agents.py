"""``torchwise agents install``: PyTorch expert agents and the MCP config for an agent host."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from torchwise.commands._common import output_options
from torchwise.console import Console


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def agents() -> None:
    """PyTorch expert agents for Claude Code, Cursor and VS Code, backed by torchwise mcp."""


@agents.command()
@click.option(
    "--host", "hosts", type=click.Choice(["claude", "cursor", "vscode"]), multiple=True,
    help="The agent host (repeatable) [default: claude].",
)  # fmt: skip
@click.option(
    "--root", type=click.Path(path_type=Path, file_okay=False), default=Path("."),
    show_default=True, help="The project to install into.",
)  # fmt: skip
@click.option(
    "--command", "command_text", metavar="CMD",
    help="How the host starts torchwise, e.g. 'torchwise' or 'uvx torchwise' "
    "[default: this Python, as '<python> -m torchwise'].",
)  # fmt: skip
@click.option(
    "--force", is_flag=True, help="Also replace same-named files torchwise did not write."
)
@output_options()
def install(
    hosts: tuple[str, ...], root: Path, command_text: str | None, force: bool, console: Console
) -> None:
    """Write the host's MCP config and five agent definitions into the project.

    \b
    Agents: pytorch-code-reviewer, pytorch-doc-writer, pytorch-engineer,
    pytorch-performance, pytorch-test-writer. Each says when to use it, which
    torchwise tools give which evidence, its output format and its rules, and
    carries a Project Knowledge section from `torchwise project`. Re-running
    updates only what torchwise generated (between its markers).
    \b
      torchwise agents install                    # Claude Code: .mcp.json, .claude/agents/
      torchwise agents install --host cursor --host vscode
    """
    from torchwise.deps import require
    from torchwise.errors import TorchwiseError

    require("pydantic", purpose="torchwise agents install")
    from torchwise.agents.hosts import HOSTS
    from torchwise.agents.install import install as install_host
    from torchwise.project import gather_knowledge

    if not root.is_dir():
        raise TorchwiseError(f"{root} is not a directory")
    command = shlex.split(command_text) if command_text else [sys.executable, "-m", "torchwise"]
    if not command:
        raise TorchwiseError("--command is empty")
    knowledge = gather_knowledge(root)
    lines = []
    for name in hosts or ("claude",):
        host = HOSTS[name]
        for written in install_host(root.resolve(), host, knowledge, command, force=force):
            lines.append(f"{written.status:<9} {written.path}")
            if written.status == "skipped":
                console.warn(f"{written.path} exists and was not written by torchwise (--force)")
        lines.append(f"{host.label}: the agents call torchwise mcp; restart the host to load them.")
    console.emit("\n".join(lines))
