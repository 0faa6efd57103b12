"""Which project files a file imports, and which open files depend on a file.

review indexes, for a buffer it reviews, the project files the buffer imports
(found beside it, or beside its top package, as Python's path would find them)
and the files those import. So when a project file changes on disk, the open
files whose findings can change are those whose imports reach it. This module
finds them from each file's ``import`` statements alone (``ast``, no other
analysis): a file's imports are read once per version of its text, from the
editor's buffer for an open file, from disk (keyed by its ``stat``) otherwise.

It errs on the side of re-analysing: ``from pkg import name`` counts both
``pkg`` and ``pkg/name.py`` when both exist.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from pathlib import Path

#: Modules never found in a project (review does not look for them either).
_NOT_PROJECT = frozenset({"torch", "numpy", "torchvision"})
#: How many files one walk of the graph visits at most (review indexes at most
#: 400 imported files per review).
_MAX_VISITED = 2000


def written_imports(tree: ast.Module) -> set[str]:
    """The modules a tree imports, as written (``.models``, ``pkg.sub``, ``pkg.sub.name``)."""
    written: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            written.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            if base:
                written.add(base)
            for alias in node.names:
                if alias.name != "*":
                    joiner = "" if base.endswith(".") or not base else "."
                    written.add(f"{base}{joiner}{alias.name}")
    return written


def locate(written: str, importer: str) -> str | None:
    """The project file an import names, looked for beside the importer (and, for
    a file in a package, beside its top package), or None."""
    if written.split(".", 1)[0] in _NOT_PROJECT:
        return None
    here = os.path.dirname(importer)
    if written.startswith("."):
        level = len(written) - len(written.lstrip("."))
        base = here
        for _ in range(level - 1):
            base = os.path.dirname(base)
        parts = [part for part in written[level:].split(".") if part]
        roots = [base]
        if not parts:  # `from . import x` names the package itself
            init = os.path.join(base, "__init__.py")
            return init if os.path.isfile(init) else None
    else:
        parts = written.split(".")
        top = here
        while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
            top = os.path.dirname(top)
        roots = [here] if top == here else [here, top]
    for root in roots:
        # The full name first: `pkg.sub.name` is pkg/sub/name.py when it exists.
        for length in range(len(parts), 0, -1):
            *inner, last = parts[:length]
            directory = os.path.join(root, *inner)
            module = os.path.join(directory, f"{last}.py")
            if os.path.isfile(module):
                return module
            init = os.path.join(directory, last, "__init__.py")
            if os.path.isfile(init):
                return init
    return None


def imported_files(tree: ast.Module, path: str) -> frozenset[str]:
    """The project files that the file at ``path`` (parsed as ``tree``) imports."""
    found = (locate(written, path) for written in written_imports(tree))
    return frozenset(os.path.normpath(file) for file in found if file is not None)


def _imports_in(source: str | bytes, path: str) -> frozenset[str]:
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    return imported_files(tree, path)


class ImportGraph:
    """The import edges of the open files (from their buffers) and of the files on
    disk they reach (read when first needed, again when their ``stat`` changes)."""

    def __init__(self) -> None:
        # An open file's buffer, and its imports once asked for (None: not yet read).
        self._open: dict[str, tuple[str, frozenset[str] | None]] = {}
        self._on_disk: dict[str, tuple[tuple[int, int], frozenset[str]]] = {}

    def set_open(self, path: str, text: str) -> None:
        """Record an open file's buffer; its imports are read only when a walk needs
        them (not on every keystroke)."""
        path = os.path.normpath(path)
        known = self._open.get(path)
        if known is None or known[0] != text:
            self._open[path] = (text, None)

    def close(self, path: str) -> None:
        self._open.pop(os.path.normpath(path), None)

    def imports_of(self, path: str) -> frozenset[str]:
        """What ``path`` imports: its buffer's imports when open, else its file's."""
        path = os.path.normpath(path)
        if path in self._open:
            text, imports = self._open[path]
            if imports is None:
                imports = _imports_in(text, path)
                self._open[path] = (text, imports)
            return imports
        try:
            stat = os.stat(path)
        except OSError:
            return frozenset()
        key = (stat.st_mtime_ns, stat.st_size)
        cached = self._on_disk.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            imports = _imports_in(Path(path).read_bytes(), path)
        except OSError:
            imports = frozenset()
        self._on_disk[path] = (key, imports)
        return imports

    def reaches(self, start: str, target: str) -> bool:
        """Whether ``start``'s imports reach ``target`` (directly or through others)."""
        target = os.path.normpath(target)
        seen = {os.path.normpath(start)}
        pending = list(self.imports_of(start))
        while pending and len(seen) < _MAX_VISITED:
            path = pending.pop()
            if path == target:
                return True
            if path in seen:
                continue
            seen.add(path)
            pending.extend(self.imports_of(path))
        return False

    def dependents(self, changed: str, candidates: Iterable[str]) -> list[str]:
        """The ``candidates`` (open files) other than ``changed`` whose imports reach it."""
        changed = os.path.normpath(changed)
        return [
            path
            for path in candidates
            if os.path.normpath(path) != changed and self.reaches(path, changed)
        ]
