"""The ``torchwise`` command line.

Subcommands live in ``torchwise.commands.<name>`` as thin click commands that
parse options and call the library. They are imported only when invoked (or
when ``--help`` lists them), so ``torchwise review`` and ``torchwise --help``
never pay for importing torch.

Every command's errors go through :func:`_run_guarded`: a
:class:`~torchwise.errors.TorchwiseError` becomes its message and exit code 2;
anything else is an internal error (traceback with ``TORCHWISE_DEBUG=1``).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

import click

from torchwise import __version__
from torchwise.errors import ExitCode, TorchwiseError

#: command name -> "module:attribute" of its click command, in help order.
COMMANDS: dict[str, str] = {
    "review": "torchwise.commands.review:review",
    "rules": "torchwise.commands.rules:rules",
    "inspect": "torchwise.commands.inspect:inspect",
    "doc": "torchwise.commands.doc:doc",
    "doctor": "torchwise.commands.doctor:doctor",
    "ckpt": "torchwise.commands.ckpt:ckpt",
}

#: One line per command for ``torchwise --help``, so listing them imports nothing.
SUMMARIES: dict[str, str] = {
    "review": "Review PyTorch source for training-loop, module, numerics and security bugs.",
    "rules": "List the review rules, or explain one (torchwise rules TW101).",
    "inspect": "Per-layer shapes, parameters, FLOPs and memory of a model.",
    "doc": "Write measured shapes and counts into a model's docstrings and docs.",
    "doctor": "Run health checks on a model and a batch (gradient flow, leaks, ...).",
    "ckpt": "Inspect, scan and convert checkpoints without executing them.",
}


def _load_command(name: str) -> click.Command:
    module_name, attribute = COMMANDS[name].split(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command):  # pragma: no cover - programming error
        raise TypeError(f"{COMMANDS[name]} is not a click command")
    return command


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        return _load_command(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Use the static summaries: loading every command to read its help would
        # import torch just to print --help.
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUMMARIES[name]) for name in COMMANDS])

    def invoke(self, ctx: click.Context) -> Any:
        return _run_guarded(lambda: super(LazyGroup, self).invoke(ctx))


def _run_guarded(call: Any) -> Any:
    try:
        return call()
    except TorchwiseError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitCode.ERROR)
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
        raise
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # the one place that turns bugs into messages
        if os.environ.get("TORCHWISE_DEBUG"):
            traceback.print_exc()
        else:
            click.echo(
                f"internal error: {type(exc).__name__}: {exc}\n"
                "This is a bug in torchwise. Re-run with TORCHWISE_DEBUG=1 for the "
                "traceback and please report it.",
                err=True,
            )
        sys.exit(ExitCode.ERROR)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="torchwise")
def app() -> None:
    """torchwise: what a senior PyTorch engineer checks, with evidence.

    \b
    Start with:
      torchwise review src/            static review of PyTorch code
      torchwise inspect zoo:resnet50   shapes, parameters, FLOPs, memory
      torchwise doctor model.py:Net    gradient flow, leaks, determinism, ...
      torchwise ckpt scan model.pt     is this checkpoint safe to load?
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    # click exits with 2 on usage errors already, matching ExitCode.ERROR.
    app.main(args=argv, prog_name="torchwise")
