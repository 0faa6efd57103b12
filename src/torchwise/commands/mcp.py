"""``torchwise mcp``: serve torchwise's tools to a coding agent over stdio."""

from __future__ import annotations

from pathlib import Path

import click

from torchwise.commands._common import output_options
from torchwise.console import Console


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root", type=click.Path(path_type=Path, file_okay=False), default=Path("."),
    show_default=True, help="The workspace: every path and model must be inside it.",
)  # fmt: skip
@click.option(
    "--time-limit", type=click.FloatRange(min=1), default=300.0, show_default=True,
    help="Seconds one tool call may run before its worker is stopped.",
)  # fmt: skip
@output_options(report=False)  # stdout is the protocol: no -o; -q/-v shape stderr
def mcp(root: Path, time_limit: float, console: Console) -> None:
    """Run the torchwise MCP server on stdin/stdout (an agent host starts it).

    \b
    Tools: project_knowledge, review, explain_rule, fix_preview, inspect_model,
    document_model, diagnose_model, scan_checkpoint, inspect_checkpoint,
    write_tests (with `torchwise tests`).
    Resources: torchwise://rules, torchwise://rules/{code},
    torchwise://project/knowledge(.md). Prompts: one per agent role.
    `torchwise agents install` writes the host's configuration for you.
    """
    from torchwise.deps import require

    require("mcp", purpose="torchwise mcp")
    from torchwise.mcp.server import build_server

    server = build_server(
        root, time_limit=time_limit, log_level="INFO" if console.verbose else "WARNING"
    )
    console.note(f"torchwise mcp: serving {root.resolve()} over stdio (Ctrl-C stops it)")
    server.run("stdio")
