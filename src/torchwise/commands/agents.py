"""``torchwise agents install``: PyTorch expert agents and the MCP config for an agent host."""

from __future__ import annotations

import shlex
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
    help="How the host starts torchwise, e.g. 'uvx torchwise' [default: 'torchwise' when "
    "it is on the PATH, else 'python -m torchwise'].",
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
      torchwise agents install --host cursor --host vscode   # .cursor/agents/, .github/agents/
    """
    from torchwise.deps import require
    from torchwise.errors import TorchwiseError

    require("pydantic", purpose="torchwise agents install")
    from torchwise.agents.hosts import HOSTS
    from torchwise.agents.install import install as install_host
    from torchwise.agents.install import portable_command
    from torchwise.project import gather_knowledge

    if not root.is_dir():
        raise TorchwiseError(f"{root} is not a directory")
    note = None
    if command_text is not None:
        try:
            command = shlex.split(command_text)
        except ValueError as exc:
            raise TorchwiseError(f"--command {command_text!r}: {exc}") from None
        if not command:
            raise TorchwiseError("--command is empty", hint="e.g. --command torchwise")
    else:
        command, note = portable_command()
    knowledge = gather_knowledge(root)
    lines = []
    for name in hosts or ("claude",):
        host = HOSTS[name]
        for written in install_host(root.resolve(), host, knowledge, command, force=force):
            lines.append(f"{written.status:<9} {written.path}")
            if written.status == "skipped":
                console.warn(f"{written.path} exists and was not written by torchwise (--force)")
            elif written.status == "kept":
                console.warn(
                    f"{written.path}: {host.label} no longer reads it and it has your own "
                    "text, so it was kept; delete it once you have moved what you need"
                )
        lines.append(f"{host.label}: the agents call torchwise mcp; restart the host to load them.")
    console.emit("\n".join(lines))
    if note is not None:
        console.warn(note)
