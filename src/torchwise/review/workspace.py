"""What an editor session keeps between reviews of its buffers.

An editor reviews the same file on every keystroke, and that file imports the
same project modules each time. A :class:`Workspace` keeps each project file's
summary, by the hash of its text, so a review indexes only what changed; and
it holds the buffers not saved yet, which every review then reads instead of
the disk (an unsaved edit to ``models.py`` reaches the open ``train.py``).
"""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path

from torchwise.review.analysis import parse
from torchwise.review.files import read_source
from torchwise.review.index.records import ModuleSummary
from torchwise.review.index.summary import source_hash, summarize_tree, unparsed


class Workspace:
    """Summaries of project files by content, and the unsaved buffers."""

    def __init__(self) -> None:
        self._summaries: dict[str, tuple[str, ModuleSummary]] = {}
        self._buffers: dict[str, str] = {}
        self._disk: dict[str, tuple[tuple[int, int], str | None]] = {}  # by (mtime, size)

    def set_buffer(self, path: str, text: str) -> bool:
        """An editor's unsaved text for ``path``: reviews read it instead of the file.
        True when what other files can see of it changed (its summary: classes,
        functions, what they return and do), so the files importing it may have
        new findings."""
        before = self._summaries.get(_key(path))
        self._buffers[_key(path)] = text
        after = self.summary(path, text)
        return before is None or _visible(before[1]) != _visible(after)

    def drop_buffer(self, path: str) -> None:
        """The buffer was closed or saved: reviews read the file again."""
        self._buffers.pop(_key(path), None)

    def imports(self, path: str) -> list[str]:
        """The project files ``path`` imports, as it reads now (see ``project_imports``)."""
        from torchwise.review.runner import imported_files

        return imported_files(path, self.summary(path))

    def text(self, path: str) -> str | None:
        """What reviews read for ``path``: its buffer, else the file (None: unreadable)."""
        buffered = self._buffers.get(_key(path))
        if buffered is not None:
            return buffered
        try:
            stat = os.stat(path)
        except OSError:
            return None
        signature = (stat.st_mtime_ns, stat.st_size)
        known = self._disk.get(_key(path))
        if known is not None and known[0] == signature:
            return known[1]
        try:
            text: str | None = read_source(Path(path)).source
        except ValueError:
            text = None
        self._disk[_key(path)] = (signature, text)
        return text

    def summary(
        self, path: str, text: str | None = None, tree: ast.Module | None = None
    ) -> ModuleSummary:
        """The summary of ``path`` as it reads now (``text``: given by the caller),
        made again only when its text changed."""
        text = self.text(path) if text is None else text
        if text is None:
            return unparsed(path)
        digest = source_hash(text)
        cached = self._summaries.get(_key(path))
        if cached is not None and cached[0] == digest:
            return cached[1]
        if tree is None:
            parsed = parse(text, path)
            tree = parsed if isinstance(parsed, ast.Module) else None
        summary = unparsed(path, text) if tree is None else summarize_tree(tree, text, path)
        self._summaries[_key(path)] = (digest, summary)
        return summary


def _key(path: str) -> str:
    return os.path.normpath(path)


def _visible(summary: ModuleSummary) -> ModuleSummary:
    """A summary without the hash of its text: what other files can see."""
    return dataclasses.replace(summary, source_hash="")
