"""Exit codes and the exceptions the CLI turns into clear messages.

Library code raises :class:`TorchwiseError` (or a subclass) with a message a
user can act on; the CLI prints it without a traceback and exits with
:attr:`ExitCode.ERROR`. Anything else escaping a command is a bug in torchwise
and is reported as an internal error, with the traceback only under
``TORCHWISE_DEBUG=1``.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """The process exit codes every command shares."""

    OK = 0
    #: review found problems, ckpt scan found an unsafe file, doctor found a failing
    #: check, doc --check found stale docs.
    FINDINGS = 1
    #: bad usage, bad input (missing path, unparsable spec, corrupt file) or an
    #: internal error.
    ERROR = 2


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


class TorchwiseWarning(UserWarning):
    """A warning torchwise itself emits (the test suite turns these into errors)."""
