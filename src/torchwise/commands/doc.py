"""``torchwise doc TARGET``: measured shapes and counts, written into docstrings."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from torchwise.commands._target import TargetArgs, target_options


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@target_options
@click.option("--write", "action", flag_value="write", help="Update the docstrings in place.")
@click.option(
    "--check", "action", flag_value="check",
    help="Write nothing; exit 1 with a diff when the docs are stale (a CI gate).",
)  # fmt: skip
@click.option("--diff", "action", flag_value="diff", help="Print the change --write would make.")
@click.option(
    "--markdown", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
    help="Also write a model reference page (with --check: check it is fresh).",
)  # fmt: skip
def doc(
    target: TargetArgs,
    action: str | None,
    markdown: Path | None,
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
      torchwise doc zoo:gpt2 --markdown docs/models/gpt2.md
    """
    from torchwise.doc.run import run_doc
    from torchwise.errors import ExitCode

    code, out, err = run_doc(
        target.text,
        inputs=target.inputs,
        init_kwargs=target.init_kwargs,
        action=action,
        markdown=markdown,
        config_start=target.config_start,
        build=target.build,
        build_on=target.build_on,
        batch_dim=target.batch_dim,
    )
    if out:
        click.echo(out, nl=not out.endswith("\n"))
    if err:
        click.echo(err, err=True)
    if code != ExitCode.OK:
        sys.exit(code)
