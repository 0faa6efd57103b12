"""Finding the files to review, and reading them (notebooks included).

Directories are walked recursively, skipping virtual environments, build
outputs, VCS folders and whatever ``.gitignore`` files along the way ignore.
They give ``.py``, ``.pyi`` and ``.ipynb`` files, and scripts without an
extension whose first line runs Python (``#!/usr/bin/env python3``: a
repository's ``train`` and ``test``). A path named explicitly on the command
line is always reviewed.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from torchwise.errors import TorchwiseError

SKIPPED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "build", "dist",
        "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".torchwise_cache", "node_modules", "site-packages", ".ipynb_checkpoints", ".eggs",
    }
)  # fmt: skip
SUFFIXES = (".py", ".pyi", ".ipynb")
_MAGIC = re.compile(r"^\s*[%!?]")
_TEST_MODULE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")


def is_test_module(path: str) -> bool:
    """A test module by pytest's naming. Judged by the file's name, not its
    folder: a whole checkout may live under a folder called tests/."""
    return bool(_TEST_MODULE.search(path.replace("\\", "/")))


@dataclass(frozen=True)
class SourceFile:
    """Python source ready for the engine. For a notebook, ``cells`` maps each
    line of the joined source to (cell number, line in cell), both 1-based."""

    path: str
    source: str
    cells: tuple[tuple[int, int], ...] | None = None

    @property
    def is_notebook(self) -> bool:
        return self.cells is not None


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Every reviewable file under ``paths``, sorted, without duplicates."""
    found: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise TorchwiseError(f"path does not exist: {raw}")
        if path.is_file():
            found[path] = None
            continue
        for file in _walk(path):
            found[file] = None
    return sorted(found)


def _walk(root: Path) -> Iterator[Path]:
    ignores: list[_IgnoreFile] = [
        _IgnoreFile.load(parent) for parent in reversed(root.resolve().parents)
    ]
    ignores = [item for item in ignores if item.patterns]
    yield from _walk_dir(root, ignores)


def _walk_dir(directory: Path, ignores: list[_IgnoreFile]) -> Iterator[Path]:
    local = _IgnoreFile.load(directory)
    active = [*ignores, local] if local.patterns else ignores
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir and (entry.name in SKIPPED_DIRS or entry.name.endswith(".egg-info")):
            continue
        if any(ignore.ignores(path, is_dir) for ignore in active):
            continue
        if is_dir:
            yield from _walk_dir(path, active)
        elif entry.is_file() and (
            entry.name.endswith(SUFFIXES) or ("." not in entry.name and _python_script(path))
        ):
            yield path


_SHEBANG = re.compile(rb"^#![^\n]*\bpython[\d.]*\b")


def _python_script(path: Path) -> bool:
    """A file whose first line is a Python shebang."""
    try:
        with open(path, "rb") as handle:
            return _SHEBANG.match(handle.read(128)) is not None
    except OSError:
        return False


@dataclass(frozen=True)
class _IgnoreFile:
    """The patterns of one ``.gitignore`` (the common subset of its syntax)."""

    base: Path
    patterns: tuple[tuple[str, bool, bool, bool], ...]  # (glob, negated, dir_only, anchored)

    @classmethod
    def load(cls, directory: Path) -> _IgnoreFile:
        patterns = []
        try:
            text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            line = line[1:] if negated else line
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            patterns.append((line.lstrip("/"), negated, dir_only, anchored))
        return cls(directory.resolve(), tuple(patterns))

    def ignores(self, path: Path, is_dir: bool) -> bool:
        try:
            relative = path.resolve().relative_to(self.base).as_posix()
        except ValueError:
            return False
        ignored = False
        for glob, negated, dir_only, anchored in self.patterns:
            if dir_only and not is_dir:
                continue
            target = relative if anchored else relative.rsplit("/", 1)[-1]
            if fnmatch.fnmatch(target, glob):
                ignored = not negated
        return ignored


def read_source(path: Path) -> SourceFile:
    """Read a ``.py`` file or a notebook's code cells. Raises ``ValueError``
    with a readable reason when the file cannot be read as source."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read file: {exc.strerror or exc}") from None
    if path.suffix == ".ipynb":
        return _read_notebook(path, raw)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 (byte {exc.start})") from None
    return SourceFile(str(path), text)


def _read_notebook(path: Path, raw: bytes) -> SourceFile:
    try:
        notebook = json.loads(raw)
        cells = notebook["cells"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("not a valid Jupyter notebook (expected JSON with 'cells')") from None
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    code_cell = 0
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        code_cell += 1
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        # IPython magics and shell escapes are not Python: keep their lines (so
        # positions hold) but make them comments. A cell magic (%%bash) takes
        # the whole cell; a line magic continues over lines ending in a backslash.
        cell_magic = text.lstrip().startswith("%%")
        continued = False
        for number, line in enumerate(text.splitlines(), start=1):
            magic = cell_magic or continued or bool(_MAGIC.match(line))
            continued = magic and line.rstrip().endswith("\\")
            lines.append("#" + line if magic else line)
            line_map.append((code_cell, number))
    return SourceFile(str(path), "\n".join(lines) + "\n", tuple(line_map))
