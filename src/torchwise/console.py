"""Where a command's words go: the report, status notes, progress and colour.

Every command shares one behaviour, set by :func:`torchwise.commands._common.output_options`:

- the **report** (what ``--format`` chose) goes to stdout, or to the file named by
  ``-o/--output``; a directory or an unwritable path is an :class:`OutputError`,
  raised before the command's work (:func:`check_writable`);
- **notes** (what is being done, what was skipped) go to stderr, hidden by
  ``--quiet``;
- **progress** is a rich display on stderr, shown only when stderr is a terminal
  and not with ``--quiet``, so logs and pipes never see control codes;
- **colour** follows ``--color auto|always|never``; under ``auto`` the
  ``NO_COLOR`` and ``FORCE_COLOR`` conventions apply (https://no-color.org/),
  then whether the stream is a terminal; a report written to a file is never
  coloured under ``auto``;
- torch's own log messages (FakeTensor fallbacks, dynamo) and the warnings it
  prints while it is imported (``Failed to initialize NumPy``) are hidden while a
  command runs, unless ``--verbose``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

import click

from torchwise.errors import OutputError

if TYPE_CHECKING:
    import rich.progress

ColorChoice = Literal["auto", "always", "never"]
COLOR_CHOICES: tuple[ColorChoice, ...] = ("auto", "always", "never")

#: Named styles -> ANSI SGR codes. Statuses share the colours every CI log uses.
STYLES: dict[str, str] = {
    "bold": "1",
    "dim": "2",
    "pass": "32",
    "ok": "32",
    "warn": "33",
    "warning": "33",
    "fail": "1;31",
    "error": "1;31",
    "skip": "2",
    "info": "36",
}


def color_enabled(choice: str, stream: TextIO) -> bool:
    """Whether to colour ``stream`` under ``--color choice`` and the environment."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    force = os.environ.get("FORCE_COLOR")
    if force is not None and force.lower() not in ("", "0", "false", "no"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, style: str, *, enabled: bool) -> str:
    """``text`` wrapped in the ANSI codes of ``style`` (a key of :data:`STYLES`)."""
    return f"\x1b[{STYLES[style]}m{text}\x1b[0m" if enabled else text


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (creating its directory), as a user-facing error if not."""
    if path.is_dir():
        raise OutputError(
            f"cannot write {path}: it is a directory", hint="give a file name, e.g. -o report.txt"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def check_writable(path: Path) -> None:
    """Raise :class:`OutputError` now if ``path`` could not be written later.

    Every command checks its ``-o`` before its work, so a bad one costs nothing (a
    tune run used to fail after its 90 s). A directory is refused; an existing file
    must be writable; otherwise the file is created, with any missing directories,
    and removed again: the one test that matches the later write everywhere
    (read-only mounts, ``/proc``, a parent that is a file, permissions).
    """
    if path.is_dir():
        raise OutputError(
            f"cannot write {path}: it is a directory", hint="give a file name, e.g. -o report.txt"
        )
    if path.exists():
        if not os.access(path, os.W_OK):
            raise OutputError(f"cannot write {path}: Permission denied")
        return
    created: list[Path] = []
    try:
        missing = []
        for parent in path.parents:
            if parent.exists() or parent.is_symlink():
                break
            missing.append(parent)
        for directory in reversed(missing):
            directory.mkdir()
            created.append(directory)
        path.touch(exist_ok=False)
        path.unlink()
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                directory.rmdir()


class ProgressHandle:
    """What a long task reports through; does nothing when progress is not shown."""

    def __init__(
        self,
        progress: rich.progress.Progress | None = None,
        task: rich.progress.TaskID | None = None,
        *,
        log_lines: bool = False,
    ) -> None:
        self._progress = progress
        self._task = task
        self._log_lines = log_lines

    def advance(self, steps: int = 1, *, label: str | None = None) -> None:
        """Count ``steps`` items done; ``label`` names what runs next."""
        if self._progress is not None and self._task is not None:
            if label is not None:
                self._progress.update(self._task, advance=steps, detail=label)
            else:
                self._progress.update(self._task, advance=steps)

    def log(self, line: str) -> None:
        """A line that stays (e.g. one finished check), printed above the bar."""
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        elif self._log_lines:
            click.echo(line, err=True)


@dataclass(frozen=True)
class Console:
    """One command's output settings (see the module docstring)."""

    color: str = "auto"
    quiet: bool = False
    verbose: bool = False
    output: Path | None = None

    @property
    def color_stdout(self) -> bool:
        """Whether the report is coloured."""
        return self.output is None and color_enabled(self.color, sys.stdout)

    @property
    def color_stderr(self) -> bool:
        return color_enabled(self.color, sys.stderr)

    def paint(self, text: str, style: str) -> str:
        """``text`` in ``style`` when the report is coloured."""
        return paint(text, style, enabled=self.color_stdout)

    def emit(self, text: str) -> None:
        """Write the report: to ``--output`` when given, else stdout (one trailing newline)."""
        if not text.endswith("\n"):
            text += "\n"
        if self.output is not None:
            write_output(self.output, text)
            return
        # color=True keeps ANSI codes in a pipe under --color always / FORCE_COLOR;
        # click strips them otherwise.
        click.echo(text, nl=False, color=True if self.color_stdout else None)

    def note(self, text: str) -> None:
        """A status line on stderr (hidden by ``--quiet``)."""
        if not self.quiet:
            click.echo(text, err=True, color=True if self.color_stderr else None)

    def warn(self, text: str) -> None:
        """A warning on stderr; shown even with ``--quiet``."""
        label = paint("warning", "warning", enabled=self.color_stderr)
        click.echo(f"{label}: {text}", err=True, color=True if self.color_stderr else None)

    def show_progress(self) -> bool:
        return not self.quiet and sys.stderr.isatty()

    @contextlib.contextmanager
    def progress(self, total: int | None, description: str) -> Iterator[ProgressHandle]:
        """A progress bar over ``total`` items on stderr (only on a terminal).

        Without a terminal nothing is drawn; :meth:`ProgressHandle.log` lines are
        then written to stderr only under ``--verbose``. Interrupting the block
        (Ctrl-C) removes the bar cleanly and lets the exception through, so the
        caller can report what finished.
        """
        if not self.show_progress():
            yield ProgressHandle(log_lines=self.verbose and not self.quiet)
            return
        from rich.console import Console as RichConsole
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        rich_console = RichConsole(
            stderr=True, no_color=not self.color_stderr, highlight=False, soft_wrap=True
        )
        columns = [
            SpinnerColumn(),
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}", markup=False),
        ]
        if total is None:
            columns = [columns[0], columns[1], columns[4], columns[5]]
        with Progress(*columns, console=rich_console, transient=True) as bar:
            task = bar.add_task(description, total=total, detail="")
            yield ProgressHandle(bar, task)

    @contextlib.contextmanager
    def torch_logs(self) -> Iterator[None]:
        """Hide torch's log records and import warnings while the block runs, unless
        ``--verbose``."""
        from torchwise.deps import quiet_torch_warnings

        if self.verbose:
            yield
            return
        with silence_torch_logs(), quiet_torch_warnings():
            yield


@contextlib.contextmanager
def silence_torch_logs() -> Iterator[None]:
    """Raise every ``torch`` logger above CRITICAL for the block, then restore them.

    torch logs FakeTensor and meta fallbacks (with tracebacks) and dynamo's graph
    breaks at WARNING and above; torchwise reports those outcomes itself, in one
    line, so the raw records are noise to a user. Loggers created inside the block
    inherit the silenced ``torch`` level.
    """
    manager = logging.Logger.manager
    names = ["torch"] + [
        name
        for name, logger in manager.loggerDict.items()
        if name.startswith("torch.") and isinstance(logger, logging.Logger)
    ]
    saved = {name: logging.getLogger(name).level for name in names}
    try:
        logging.getLogger("torch").setLevel(logging.CRITICAL + 1)
        for name in names[1:]:
            if saved[name] != logging.NOTSET:
                logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
