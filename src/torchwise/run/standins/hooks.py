"""Code that runs right after a module is first imported (a post-import hook).

The stand-ins patch libraries the script may import later, or never:
torchvision, torchaudio, timm, transformers, datasets. Importing them up front
would cost seconds and change what the script sees, so the patch waits for the
import. :class:`AfterImport` is a finder on ``sys.meta_path`` that lets the
real finder find the module and wraps its loader, so the callback runs once
the module's own code has run; a module imported before the run started is
patched at once.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callbacks[name](module)`` after the module ``name`` is imported."""

    def __init__(self, callbacks: dict[str, Callback]) -> None:
        self.callbacks = dict(callbacks)
        self._finding: set[str] = set()

    def install(self) -> Callable[[], None]:
        """Put the finder first on ``sys.meta_path`` and patch the modules
        already imported; returns what undoes the finder."""
        for name, callback in list(self.callbacks.items()):
            module = sys.modules.get(name)
            if module is not None:
                del self.callbacks[name]
                callback(module)
        sys.meta_path.insert(0, self)
        return self.remove

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        callback = self.callbacks.get(fullname)
        if callback is None or fullname in self._finding:
            return None
        self._finding.add(fullname)
        try:
            spec = _find_with_others(self, fullname, path, target)
        finally:
            self._finding.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # The callback is taken when the module runs, not here: `importlib.util.find_spec`
        # (transformers asks it whether datasets is installed) finds without importing.
        spec.loader = _CallingBack(spec.loader, lambda module: self._run_once(fullname, module))
        return spec

    def _run_once(self, fullname: str, module: ModuleType) -> None:
        callback = self.callbacks.pop(fullname, None)  # once: a reload is the script's business
        if callback is not None:
            callback(module)


def _find_with_others(
    own: object, fullname: str, path: Sequence[str] | None, target: ModuleType | None
) -> importlib.machinery.ModuleSpec | None:
    for finder in sys.meta_path:
        if finder is own or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _CallingBack(importlib.abc.Loader):
    """The real loader, then the callback on the module it made."""

    def __init__(self, loader: Any, callback: Callback) -> None:
        self.loader = loader
        self.callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.callback(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ...: the real loader's
        return getattr(self.loader, name)
