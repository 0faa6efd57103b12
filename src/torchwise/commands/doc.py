"""``torchwise doc TARGET``: measured shapes and counts, written into docstrings."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from torchwise.commands._common import output_options
from torchwise.commands._target import target_options
from torchwise.target.request import TargetRequest

if TYPE_CHECKING:
    from torchwise.console import Console


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@target_options
@click.option("--write", is_flag=True, help="Update the docstrings in place.")
@click.option(
    "--check", is_flag=True,
    help="Write nothing; exit 1 with a diff when the docs are stale (a CI gate).",
)  # fmt: skip
@click.option(
    "--diff", is_flag=True,
    help="Print the change --write would make; exit 1 when there is one (as review --diff).",
)  # fmt: skip
@click.option(
    "--markdown", type=click.Path(path_type=Path), metavar="PATH",
    help="Also write a model reference page (with --check: check it is fresh).",
)  # fmt: skip
@output_options()
def doc(
    target: TargetRequest,
    write: bool,
    check: bool,
    diff: bool,
    markdown: Path | None,
    console: Console,
) -> None:
    """Generate a model's docstrings from measurements and keep them true.

    \b
    Class docstring: Args, Attributes, Shape (symbolic, e.g. (batch, seq_len, 768)),
    Complexity, Train and eval, and an Example that torchwise runs; forward: Args
    and Returns with shapes and dtypes. Author prose and other sections are kept.
    \b
      torchwise doc model.py:Net --input 'f32[8,3,32,32]'          # print
      torchwise doc model.py:Net --input 'f32[8,3,32,32]' --write  # update the file
      torchwise doc model.py:Net --input 'f32[8,3,32,32]' --check  # CI: exit 1 if stale
      torchwise doc model.py --build 'GPT(GPTConfig(n_layer=2))' --diff
      torchwise doc zoo:gpt2 --markdown docs/models/gpt2.md
    \b
    Exit codes: 0 done or up to date; 1 --check found stale docs or --diff would
    change a file; 2 bad input or a model that does not run.
    """
    from torchwise.doc.run import run_doc
    from torchwise.errors import ConfigError, ExitCode

    chosen = [name for name, on in (("write", write), ("check", check), ("diff", diff)) if on]
    if len(chosen) > 1:
        raise ConfigError(
            f"--{' and --'.join(chosen)} cannot be combined: --write changes the file, --check "
            "and --diff only compare",
            hint="use --write to update, then --check in CI",
        )
    action = chosen[0] if chosen else None

    # The model's own prints go to stderr: stdout carries only the docstrings or the diff.
    with contextlib.redirect_stdout(sys.stderr):
        code, out, err = run_doc(target, action=action, markdown=markdown, console=console)
    if out:
        console.emit(out)
    for line in err.splitlines():
        console.note(line)
    if code != ExitCode.OK:
        sys.exit(code)
