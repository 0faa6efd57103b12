"""The generated module, imported in this process the way pytest will import it.

Every decision about what the file contains is made by running the file's own
code: its helpers build the model and the inputs, its tests are called with the
arguments pytest would pass. What was learnt is therefore about the exact code
the user gets, not about a copy of the logic. The import is sandboxed: the
user's module is imported under the name the tests use, with a clean
``sys.argv``, printing to stderr, and ``sys.path``/``sys.modules`` are put back
afterwards so one generation cannot leak into the next.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torchwise.errors import UserCodeError


@contextlib.contextmanager
def sandbox(
    user_dirs: list[Path], module_names: set[str], pythonpath: tuple[Path, ...] = ()
) -> Iterator[None]:
    """Restore ``sys.path``, ``sys.argv`` and the user's entries of ``sys.modules`` on exit.

    ``module_names`` are top-level names the generated file imports from the user's
    directories (``model`` for ``model.py``); a module of that name imported earlier
    (another project's ``model.py``) is set aside meanwhile, so it cannot be used.
    ``pythonpath`` are the directories pytest's ``pythonpath`` setting adds, added
    here too.
    """
    saved_path, saved_argv = list(sys.path), sys.argv
    sys.path[:0] = [str(p) for p in pythonpath]
    stashed = {
        name: sys.modules.pop(name)
        for name in list(sys.modules)
        if name.split(".")[0] in module_names
    }
    before = set(sys.modules)
    roots = [d.resolve() for d in user_dirs]
    sys.argv = [sys.argv[0] if sys.argv else "pytest"]
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            file = getattr(module, "__file__", None)
            ours = name.split(".")[0] in module_names
            if ours or (file and any(Path(file).resolve().is_relative_to(r) for r in roots)):
                del sys.modules[name]
        sys.modules.update(stashed)
        sys.path[:] = saved_path
        sys.argv = saved_argv


class Session:
    """One import of a rendered module; call its helpers and tests."""

    def __init__(self, text: str, path: Path, *, import_line: str | None) -> None:
        self.path = path
        self.namespace: dict[str, Any] = {
            "__name__": f"torchwise_generated_{path.stem}",
            "__file__": str(path),
            "__builtins__": builtins,
        }
        code = compile(text, str(path), "exec")
        try:
            exec(code, self.namespace)  # the module torchwise just wrote, importing the user's
        except Exception as exc:
            doing = (
                f"importing the model as the tests do ({import_line})"
                if import_line
                else ("importing the generated test module")
            )
            raise UserCodeError.from_exception(exc, doing=doing) from None

    def get(self, name: str) -> Callable[..., Any]:
        value: Callable[..., Any] = self.namespace[name]
        return value

    def run_test(self, name: str, *args: Any, class_name: str | None = None) -> str | None:
        """Call test ``name`` with pytest's arguments; None when it passes, else why not."""
        function = self._test(name, class_name)
        try:
            with tempfile.TemporaryDirectory(prefix="torchwise-tests-") as tmp:
                filled = [Path(tmp) if a is TMP_PATH else a for a in args]
                function(*filled)
        except AssertionError as exc:
            first = str(exc).strip().splitlines()
            return f"assertion failed: {first[0]}" if first else "assertion failed"
        except Exception as exc:
            from torchwise.errors import exception_line

            return f"raised {exception_line(exc)}"
        return None

    def _test(self, name: str, class_name: str | None) -> Callable[..., Any]:
        if class_name is None:
            return self.get(name)
        instance = self.namespace[class_name]()
        method: Callable[..., Any] = getattr(instance, name)
        return method


#: Stands for pytest's ``tmp_path`` in :meth:`Session.run_test` arguments.
TMP_PATH = object()
