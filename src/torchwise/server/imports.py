"""Which open files depend on a file.

review indexes, for a buffer it reviews, the project files the buffer imports
and the files those import. So when a project file changes (its buffer or on
disk), the open files whose findings can change are those whose imports reach
it. Each file's direct imports come from review itself
(``Workspace.imports``), resolved as a review resolves them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from torchwise.review import Workspace

#: Modules never found in a project (review does not look for them either).
_NOT_PROJECT = frozenset({"torch", "numpy", "torchvision"})
#: How many files one walk of the graph visits at most (review indexes at most
#: 400 imported files per review).
_MAX_VISITED = 2000


class ImportGraph:
    """The import edges of the open files (from their buffers) and of the files on
    disk they reach, as the review workspace reads them (each file's imports are
    worked out again only when its text changes)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def imports_of(self, path: str) -> frozenset[str]:
        """What ``path`` imports: its buffer's imports when open, else its file's."""
        return frozenset(os.path.normpath(file) for file in self.workspace.imports(path))

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
