"""The ``torchwise`` command line.

Subcommands live in ``torchwise.commands.<name>`` as thin click commands that
parse options and call the library. They are imported only when invoked (or
when ``--help`` lists them), so ``torchwise review`` and ``torchwise --help``
never pay for importing torch.

Every command's errors go through :func:`_run_guarded` and :func:`main`: a
:class:`~torchwise.errors.TorchwiseError` (including a missing optional
dependency) and a usage error become one ``error:`` line and exit code 2; a
closed pipe exits quietly; anything else is an internal error (traceback with
``TORCHWISE_DEBUG=1``).
"""

from __future__ import annotations

import errno
import importlib
import os
import re
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import click

from torchwise import __version__
from torchwise.errors import ExitCode, TorchwiseError

#: command name -> "module:attribute" of its click command, in help order.
COMMANDS: dict[str, str] = {
    "review": "torchwise.commands.review:review",
    "rules": "torchwise.commands.rules:rules",
    "server": "torchwise.commands.server:server",
    "inspect": "torchwise.commands.inspect:inspect",
    "doc": "torchwise.commands.doc:doc",
    "doctor": "torchwise.commands.doctor:doctor",
    "run": "torchwise.commands.run:run",
    "ckpt": "torchwise.commands.ckpt:ckpt",
    "tests": "torchwise.commands.tests:tests",
    "tune": "torchwise.commands.tune:tune",
    "project": "torchwise.commands.project:project",
    "mcp": "torchwise.commands.mcp:mcp",
    "agents": "torchwise.commands.agents:agents",
}

#: One line per command for ``torchwise --help``, so listing them imports nothing.
SUMMARIES: dict[str, str] = {
    "review": "Review PyTorch source for training-loop, module, numerics and security bugs.",
    "rules": "List the review rules, or explain one (torchwise rules TW101).",
    "server": "Language server: review's findings, rule docs and fixes in your editor.",
    "inspect": "Per-layer shapes, parameters, FLOPs and memory of a model.",
    "doc": "Write measured shapes and counts into a model's docstrings and docs.",
    "doctor": "Run health checks on a model and a batch (gradient flow, leaks, ...).",
    "run": "Run a training script for a few steps and report what it really does.",
    "ckpt": "Inspect, scan and convert checkpoints without executing them.",
    "tests": "Write a pytest module for a model: shape contract, health, round trips.",
    "tune": "Measure a training step and recommend what makes it faster, with evidence.",
    "project": "Learn and audit a PyTorch project: stack, commands, models, findings (HTML too).",
    "mcp": "Serve torchwise's tools to coding agents over MCP (stdio).",
    "agents": "Install PyTorch expert agents and the MCP config for Claude Code, Cursor, VS Code.",
}


def _load_command(name: str) -> click.Command:
    from torchwise.commands._common import finite_numbers

    module_name, attribute = COMMANDS[name].split(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command):  # pragma: no cover - programming error
        raise TypeError(f"{COMMANDS[name]} is not a click command")
    # One rule for every command's numbers, present and future: nan and inf are refused.
    return finite_numbers(command)


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

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Every outcome is an exit code; every error, usage errors included, one line."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message(), err=True)  # a group called bare: its help
            sys.exit(ExitCode.ERROR)
        except click.UsageError as exc:
            message = exc.format_message().rstrip(".")
            _print_error(message[:1].lower() + message[1:])
            if not isinstance(exc, click.BadParameter) or isinstance(exc, click.MissingParameter):
                command = exc.ctx.command_path if exc.ctx is not None else "torchwise"
                click.echo(f"hint: run '{command} --help' for the usage", err=True)
            sys.exit(ExitCode.ERROR)
        except click.ClickException as exc:
            _print_error(exc.format_message())
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("interrupted", err=True)
            sys.exit(ExitCode.INTERRUPTED)
        except BrokenPipeError:
            _exit_quietly_on_broken_pipe()
        sys.exit(result if isinstance(result, int) else ExitCode.OK)

    def invoke(self, ctx: click.Context) -> Any:
        return _run_guarded(lambda: super(LazyGroup, self).invoke(ctx), _command_path(ctx))


def _print_error(message: str) -> None:
    """``error: ...`` on stderr, the label red on a terminal (one line, plus a hint line)."""
    from torchwise.console import color_enabled, paint

    colored = color_enabled("auto", sys.stderr)
    label = paint("error", "error", enabled=colored)
    click.echo(f"{label}: {message}", err=True, color=True if colored else None)


def _exit_quietly_on_broken_pipe() -> NoReturn:
    # The reader went away (``torchwise rules | head -1``): point stdout at
    # /dev/null so the interpreter's final flush cannot raise again, and exit as
    # a process killed by SIGPIPE would, without a word.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(128 + 13)


def _run_guarded(call: Callable[[], Any], command: str) -> Any:
    """Run a command, mapping every exception to its message and exit code."""
    try:
        return call()
    except TorchwiseError as exc:
        _print_error(str(exc))
        sys.exit(ExitCode.ERROR)
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
        raise
    except BrokenPipeError:
        _exit_quietly_on_broken_pipe()
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except ModuleNotFoundError as exc:
        # Optional dependencies are imported where they are used; reaching here
        # means the user's environment lacks one (errors in the user's own
        # imports are reported by the target loader with their file:line).
        if exc.name and exc.name.split(".")[0] != "torchwise":
            from torchwise.deps import missing

            _print_error(str(missing(exc.name, purpose=command)))
            sys.exit(ExitCode.ERROR)
        _internal_error(exc)
    except OSError as exc:
        # A file the user named that cannot be read or written, reaching here from a
        # place that did not say so itself: still one line, "cannot read/write PATH".
        if exc.filename is None:
            _internal_error(exc)
        _print_error(os_error_line(exc))
        sys.exit(ExitCode.ERROR)
    except Exception as exc:  # the one place that turns bugs into messages
        _internal_error(exc)


#: errno values that only writing meets; the rest are said as a failed read unless the
#: failing call was a write (read-only file system, full disk, an existing target).
_WRITE_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EEXIST})
_WRITING = ("write", "save", "dump", "mkdir", "touch", "replace", "rename", "unlink", "copy")


def os_error_line(exc: OSError) -> str:
    """``cannot read PATH: reason`` or ``cannot write PATH: reason`` for an OSError."""
    # the failing call: the innermost frames' functions and lines (Path.write_text, open(.., "w"))
    frames = traceback.extract_tb(exc.__traceback__)[-2:]
    calls = " ".join(f"{frame.name} {frame.line or ''}" for frame in frames)
    writing = exc.errno in _WRITE_ERRNOS or any(word in calls for word in _WRITING)
    writing = writing or bool(re.search(r"""open\(.*['"][wax]""", calls))
    reason = exc.strerror or str(exc)
    return f"cannot {'write' if writing else 'read'} {exc.filename}: {reason}"


def _internal_error(exc: BaseException) -> NoReturn:
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


def _command_path(ctx: click.Context) -> str:
    """``torchwise ckpt convert`` for the command about to run (for messages)."""
    # The group has not resolved its subcommand yet: read it off the arguments.
    words = [*getattr(ctx, "_protected_args", []), *ctx.args]
    path = ["torchwise"]
    if words and words[0] in COMMANDS:
        path.append(words[0])
        command = _load_command(words[0])
        if isinstance(command, click.Group) and len(words) > 1 and words[1] in command.commands:
            path.append(words[1])
    return " ".join(path)


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
    app.main(args=argv, prog_name="torchwise")
