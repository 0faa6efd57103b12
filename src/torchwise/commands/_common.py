"""The output options every command shares: ``-o``, ``--color``, ``--quiet``, ``--verbose``.

A command decorated with :func:`output_options` receives one
:class:`~torchwise.console.Console` as its ``console`` argument and runs with
torch's own log records hidden unless ``--verbose`` (see :mod:`torchwise.console`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from torchwise.console import COLOR_CHOICES, Console

F = TypeVar("F", bound=Callable[..., Any])


def output_options(*, report: bool = True) -> Callable[[F], F]:
    """Add the shared output options; ``report=False`` leaves out ``-o`` (for commands
    whose ``-o`` means something else, such as ``ckpt convert``'s output file)."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def run(
            *args: Any,
            color: str,
            no_color: bool,
            quiet: bool,
            verbose: bool,
            **kwargs: Any,
        ) -> Any:
            output: Path | None = kwargs.pop("output") if report else None
            if quiet and verbose:
                raise click.UsageError("--quiet and --verbose cannot be used together")
            console = Console(
                color="never" if no_color else color, quiet=quiet, verbose=verbose, output=output
            )
            with console.torch_logs():
                return command(*args, console=console, **kwargs)

        decorators = [
            click.option(
                "--color",
                type=click.Choice(COLOR_CHOICES),
                default="auto",
                show_default=True,
                help="Colour the output; auto honours NO_COLOR and FORCE_COLOR.",
            ),
            click.option("--no-color", is_flag=True, hidden=True, help="Same as --color never."),
            click.option("-q", "--quiet", is_flag=True, help="Print only the report (no notes)."),
            click.option(
                "-v", "--verbose", is_flag=True, help="Also print torch's own log messages."
            ),
        ]
        if report:
            decorators.insert(
                0,
                click.option(
                    "-o",
                    "--output",
                    type=click.Path(path_type=Path),
                    default=None,
                    help="Write the report to this file instead of stdout.",
                ),
            )
        wrapped: Any = run
        for decorator in reversed(decorators):
            wrapped = decorator(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate
