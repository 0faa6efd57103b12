"""What every command shares: the output options and the numbers it accepts.

A command decorated with :func:`output_options` receives one
:class:`~torchwise.console.Console` as its ``console`` argument, has its ``-o``
checked before its work, and runs with torch's own log records hidden unless
``--verbose`` (see :mod:`torchwise.console`). :func:`finite_numbers` makes every
float parameter refuse ``nan`` and infinities (the CLI applies it to each command
it loads).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from torchwise.console import COLOR_CHOICES, Console, check_writable

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
            if output is not None:
                check_writable(output)  # before the work, not after it
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


def _finite(kind: Any, number: Any, param: Any, ctx: Any) -> Any:
    if isinstance(number, float) and not math.isfinite(number):
        kind.fail(f"{number} is not a finite number.", param, ctx)
    return number


class FiniteFloat(click.types.FloatParamType):
    """A float that is a number: ``nan`` passes every range check, and ``inf`` budgets
    and limits never end."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return _finite(self, super().convert(value, param, ctx), param, ctx)


class FiniteFloatRange(click.FloatRange):
    """:class:`click.FloatRange`, finite (see :class:`FiniteFloat`)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return _finite(self, super().convert(value, param, ctx), param, ctx)


def finite_numbers(command: click.Command) -> click.Command:
    """Give every float parameter of ``command`` (and its subcommands) a finite type."""
    for param in command.params:
        kind = param.type
        if isinstance(kind, (FiniteFloat, FiniteFloatRange)):
            continue
        if isinstance(kind, click.FloatRange):
            param.type = FiniteFloatRange(
                kind.min, kind.max, min_open=kind.min_open, max_open=kind.max_open, clamp=kind.clamp
            )
        elif isinstance(kind, click.types.FloatParamType):
            param.type = FiniteFloat()
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            finite_numbers(sub)
    return command
