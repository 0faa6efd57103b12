"""``torchwise server``: the language server, on stdin/stdout (an editor starts it)."""

from __future__ import annotations

import click

from torchwise.commands._common import output_options
from torchwise.console import Console


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--stdio", is_flag=True,
    help="Speak the protocol on stdin/stdout (the default; accepted as editors pass it).",
)  # fmt: skip
@output_options(report=False)  # stdout is the protocol: no -o
def server(stdio: bool, console: Console) -> None:
    """Run the torchwise language server on stdin/stdout (an editor starts it).

    \b
    Publishes review's findings as diagnostics while you type, the rule's
    documentation on hover, fixes and `# noqa` as code actions, and
    `source.fixAll.torchwise`; reads [tool.torchwise] as `torchwise review` does.
    Needs the `server` extra: pip install 'torchwise[server]'.
    Editor setup (VS Code, Neovim, Helix): docs/server.md.
    """
    from torchwise.deps import require

    require("pygls", purpose="torchwise server")
    from torchwise.server import build_server

    console.note("torchwise server: speaking the Language Server Protocol on stdio")
    build_server().start_io()
