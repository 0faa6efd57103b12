"""Exit codes and the one taxonomy of errors the CLI turns into clear messages.

Library code raises :class:`TorchwiseError` (or a subclass) with a message a
user can act on; the CLI prints it as one ``error: ...`` line (plus an optional
``hint:`` line), without a traceback, and exits with :attr:`ExitCode.ERROR`.

- :class:`ConfigError`: ``[tool.torchwise]`` is malformed or has an unknown key.
- :class:`MissingDependencyError`: an optional package (torch, safetensors, ...)
  a command needs is not installed.
- :class:`OutputError`: a report or file cannot be written where the user asked.
- :class:`UserCodeError`: the user's own code (a model's constructor or forward, a
  factory, a module's import) raised; the message names the submodule and the
  user's ``file:line``, the same way in every command.

Anything else escaping a command is a bug in torchwise and is reported as an
internal error, with the traceback only under ``TORCHWISE_DEBUG=1``.
"""

from __future__ import annotations

import enum
import os
import sys
import sysconfig
import traceback
from pathlib import Path


class ExitCode(enum.IntEnum):
    """The process exit codes every command shares."""

    OK = 0
    #: review found problems, ckpt scan found an unsafe file, doctor found a failing
    #: check, doc --check found stale docs, a --diff would change a file.
    FINDINGS = 1
    #: bad usage, bad input (missing path, unparsable spec, corrupt file), a missing
    #: optional dependency, or an internal error.
    ERROR = 2
    #: Ctrl-C stopped the run (what finished was still reported): 128 + SIGINT, as shells do
    INTERRUPTED = 130


class TorchwiseError(Exception):
    """An error caused by the user's input, with a message that says what to do."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}\nhint: {self.hint}"


class ConfigError(TorchwiseError):
    """``[tool.torchwise]`` in pyproject.toml is malformed."""


class MissingDependencyError(TorchwiseError):
    """A command needs an optional package that is not installed."""


class OutputError(TorchwiseError):
    """A report or converted file cannot be written where the user asked."""


def _library_roots() -> tuple[str, ...]:
    # Frames under these directories are not "the user's code": the standard
    # library, installed packages, torch and torchwise itself.
    roots = {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
    roots.add(str(Path(__file__).resolve().parent))
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        roots.add(str(Path(torch.__file__).resolve().parent))  # type: ignore[arg-type]
    return tuple(os.path.normcase(root) + os.sep for root in roots)


def _is_installed(filename: str) -> bool:
    parts = Path(filename).parts
    return "site-packages" in parts or "dist-packages" in parts


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost traceback frame of ``exc`` in the user's code.

    Prefers a frame outside the standard library, torch, torchwise and installed
    packages (the user's own ``model.py``); falls back to an installed third-party
    package (``transformers/models/...``), because that is still where the
    model's code is. ``None`` when every frame is library code.
    """
    library = _library_roots()
    frames = []
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.normcase(os.path.abspath(frame.filename))
        if frame.filename.startswith("<") or path.startswith(_own_roots()):
            continue
        # in a venv the stdlib root (.venv/lib/python3.x) is a prefix of site-packages:
        # an installed package is judged as installed, not as the standard library
        if path.startswith(library) and not _is_installed(frame.filename):
            continue
        frames.append(frame)
    own = [frame for frame in frames if not _is_installed(frame.filename)]
    chosen = own or frames
    return chosen[-1] if chosen else None


def _own_roots() -> tuple[str, ...]:
    # torchwise and torch are never the model's code, wherever they are installed
    roots = [str(Path(__file__).resolve().parent)]
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        roots.append(str(Path(torch.__file__).resolve().parent))  # type: ignore[arg-type]
    return tuple(os.path.normcase(root) + os.sep for root in roots)


def display_path(filename: str) -> str:
    """``filename`` relative to the working directory when it is under it."""
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def exception_line(exc: BaseException) -> str:
    """``ValueError: message``, on one line (long messages keep their first line)."""
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg}"
    text = traceback.format_exception_only(type(exc), exc)[-1].strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if len(first) <= 300 else first[:297] + "..."


class UserCodeError(TorchwiseError):
    """The user's code raised while torchwise ran it.

    One message format everywhere (inspect, doc, doctor, tune, target loading)::

        forward of GPT raised in transformer.h.0.attn (CausalSelfAttention)
        at model.py:42: RuntimeError: shapes cannot be multiplied (8x64 and 32x64)
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        location: str | None = None,
        original: BaseException | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        #: ``file:line`` in the user's code, when one was found.
        self.location = location
        self.original = original

    @classmethod
    def from_exception(
        cls,
        exc: BaseException,
        *,
        doing: str,
        where: str | None = None,
        hint: str | None = None,
    ) -> UserCodeError:
        """Describe ``exc`` raised while ``doing`` (e.g. ``"forward of GPT"``).

        ``where`` names the submodule that was running, e.g.
        ``"transformer.h.0.attn (CausalSelfAttention)"``.
        """
        location = None
        if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
            # A syntax error has no frame in the user's file: the parser reports it.
            location = f"{display_path(exc.filename)}:{exc.lineno}"
        elif (frame := user_frame(exc)) is not None:
            location = f"{display_path(frame.filename)}:{frame.lineno}"
        parts = [f"{doing} raised"]
        if where:
            parts.append(f"in {where}")
        if location:
            parts.append(f"at {location}")
        message = " ".join(parts) + f": {exception_line(exc)}"
        return cls(message, hint=hint, location=location, original=exc)
