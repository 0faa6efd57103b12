"""Run a piece of work that imports user code in a child process with a time limit.

Importing a project's model file runs it, and its constructor and forward are the
user's code: they may hang, exit, crash the interpreter or leave state behind.
So ``torchwise project`` and the MCP server run that work in a child process
that can be killed when its time is up, and that writes no ``__pycache__`` into
the project sees a neutral ``sys.argv`` (a module that parses arguments at import must
not read torchwise's), and whose stdout is its stderr (the parent's stdout
carries a report or the MCP protocol).

Children are forked from a *forkserver* that has already imported the modules
the first job names (``preload``: torch and the capabilities the jobs use), so
each job starts in milliseconds instead of paying for ``import torch`` again (on
platforms without forkserver, children are spawned). The forkserver is one per
process and starts with the first job, so the first job's ``preload`` is the one
that counts; callers share theirs (``project.WORKER_PRELOAD``).
A job sends ``("progress", done, total, message)`` messages while it runs and
one ``("ok", result)`` or ``("error", kind, message)`` at the end.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchwise.errors import TorchwiseError, UserCodeError

ProgressCallback = Callable[[float, float | None, str], None]


class JobFailed(TorchwiseError):
    """The job did not finish; ``partial`` is the last partial result it sent, if any."""

    partial: Any = None


class JobTimeout(JobFailed):
    """The job ran past its time limit and was stopped."""


class JobCrashed(JobFailed):
    """The child process died without a result (a segfault, ``os._exit``, out of memory)."""


@dataclass(frozen=True)
class Progress:
    """What a job calls to report progress (sent to the parent; never blocks for long)."""

    connection: Any

    def __call__(self, done: float, total: float | None = None, message: str = "") -> None:
        with contextlib.suppress(OSError, ValueError):  # the parent went away: we get killed
            self.connection.send(("progress", done, total, message))

    def partial(self, result: Any) -> None:
        """What the job has so far, kept by the parent in case the job is then stopped."""
        with contextlib.suppress(OSError, ValueError):
            self.connection.send(("partial", result))


_CONTEXT: Any = None


def _context(preload: Sequence[str]) -> Any:
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            _CONTEXT = multiprocessing.get_context("forkserver")
            _CONTEXT.set_forkserver_preload(list(preload))
        else:  # pragma: no cover - Windows
            _CONTEXT = multiprocessing.get_context("spawn")
    return _CONTEXT


def _child(connection: Any, cwd: str, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
    sys.dont_write_bytecode = True  # never leave __pycache__ in the user's project
    # The parent's stdout may be a report or an MCP stream: what the user's code
    # prints (at import, in forward) goes to stderr instead, from Python or from C.
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.argv = [sys.argv[0] if sys.argv else "torchwise"]
    os.chdir(cwd)
    try:
        result = function(*args, Progress(connection))
        message: tuple[Any, ...] = ("ok", result)
    except UserCodeError as exc:
        message = ("error", "user", str(exc))
    except TorchwiseError as exc:
        message = ("error", "torchwise", str(exc))
    except SystemExit as exc:
        message = ("error", "user", f"the code called sys.exit({exc.code!r})")
    except BaseException as exc:  # the job's own bug or the user's: report, never hang
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        message = ("error", "crash", f"{type(exc).__name__}: {exc}\n{''.join(frames[-6:])}")
    try:
        connection.send(message)
    except Exception as exc:  # an unpicklable result is our bug: say so
        connection.send(("error", "crash", f"cannot send the result back: {exc}"))
    connection.close()


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """Start a child without it re-running the parent's ``__main__`` (a script that
    calls the API without an ``if __name__ == "__main__"`` guard would run again)."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


class Job:
    """One child process running ``function(*args, progress)``."""

    def __init__(
        self,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        cwd: Path,
        preload: Sequence[str] = ("torch",),
    ) -> None:
        context = _context(preload)
        self._receiver, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            # Not a daemon: a job may start its own workers (review's process pool);
            # every path out of run_isolated kills it.
            target=_child,
            args=(sender, str(cwd), function, args),
            daemon=False,
        )
        with _main_hidden():
            self._process.start()
        sender.close()
        self.result: Any = None
        self.done = False

    def messages(self, wait: float) -> Iterator[tuple[Any, ...]]:
        """Messages that arrived within ``wait`` seconds (progress, then the final one)."""
        try:
            ready = self._receiver.poll(wait)
        except (OSError, EOFError):
            ready = True
        while ready:
            try:
                message = self._receiver.recv()
            except (EOFError, OSError):
                self.done = True
                self._process.join(5)
                code = self._process.exitcode
                raise JobCrashed(
                    f"the worker process died without a result (exit code {code})",
                    hint="the model's code may have crashed the interpreter or run out of memory",
                ) from None
            if message[0] in ("ok", "error"):
                self.done = True
                self._process.join(5)
            yield message
            if self.done:
                return
            ready = self._receiver.poll(0)

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)
        self._receiver.close()


def import_from(root: Path) -> None:
    """Let the project's code import its own packages as its scripts do (worker only).

    Scripts run from the project root (``python train.py``) import ``util.box_ops``
    or ``models.resnet`` relative to it, and src-layout projects import from
    ``src/``; a model file imported by path would not find them otherwise.
    """
    for entry in (root / "src", root):
        if entry.is_dir() and str(entry) not in sys.path:
            sys.path.insert(0, str(entry))


def finish(message: tuple[Any, ...]) -> Any:
    """The job's result, or its error raised as the matching TorchwiseError."""
    if message[0] == "ok":
        return message[1]
    kind, text = message[1], message[2]
    if kind == "user":
        raise UserCodeError(text)
    if kind == "torchwise":
        raise TorchwiseError(text)
    raise JobCrashed(f"internal error in a torchwise worker: {text}")


def run_isolated(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    cwd: Path,
    timeout: float,
    what: str,
    on_progress: ProgressCallback | None = None,
    preload: Sequence[str] = ("torch",),
) -> Any:
    """``function(*args, progress)`` in a child process; its result, or a TorchwiseError.

    ``function`` must be a module-level function (it is pickled by reference) and
    its result picklable; ``preload`` names the modules the worker forkserver
    imports before its first fork (see the module docstring). Past ``timeout``
    seconds the child is killed and :class:`JobTimeout` says what was stopped.
    """
    job = Job(function, args, cwd, preload)
    deadline = time.monotonic() + timeout
    partial: Any = None
    doing = ""  # the job's last progress message: what it was doing when stopped
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                during = f" during {doing}" if doing else ""
                raise JobTimeout(
                    f"{what} took longer than {timeout:g}s and was stopped{during}",
                    hint="raise the time limit, or configure smaller inputs",
                )
            for message in job.messages(min(remaining, 0.5)):
                if message[0] == "progress":
                    doing = message[3] or doing
                    if on_progress is not None:
                        on_progress(message[1], message[2], message[3])
                elif message[0] == "partial":
                    partial = message[1]
                else:
                    return finish(message)
    except JobFailed as exc:
        exc.partial = partial
        raise
    finally:
        job.kill()
