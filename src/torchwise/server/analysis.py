"""One analysis of one editor document: what review found in the text the editor
holds, with what it takes to place each finding back in the editor.

A document is a Python file (saved or not) or a notebook. A notebook's code
cells are joined into one text, as ``torchwise review`` joins an ``.ipynb``'s:
IPython magics and shell escapes (``%``, ``!``, a ``%%`` cell) become comments
so positions hold, and each finding belongs to the cell its first line is in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from torchwise.review import Finding, ReviewSettings, Workspace, review_text
from torchwise.server.positions import LineIndex

_MAGIC = re.compile(r"\s*[%!]")
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Cell:
    """One notebook cell: its document, and where its lines sit in the joined text."""

    uri: str
    text: str
    first_line: int  # 0-based line of the joined text where the cell starts
    line_count: int


@dataclass(frozen=True)
class Source:
    """The text of one document as the editor holds it, at one version."""

    key: str  # the document's URI (a notebook's own URI for its cells)
    path: str  # the file it stands for (for settings, imports and reported paths)
    version: int | None
    text: str
    cells: tuple[Cell, ...] | None = None  # None: a plain file

    @classmethod
    def notebook(
        cls, key: str, path: str, version: int | None, cells: Sequence[tuple[str, str]]
    ) -> Source:
        """A notebook from its code cells' (URI, text), in order."""
        lines: list[str] = []
        placed = []
        for uri, text in cells:
            cell_lines = _LINE_END.split(text)
            if cell_lines and cell_lines[-1] == "":
                cell_lines.pop()
            cell_magic = text.lstrip().startswith("%%")
            continued = False
            commented = []
            for line in cell_lines:
                magic = cell_magic or continued or bool(_MAGIC.match(line))
                continued = magic and line.rstrip().endswith("\\")
                commented.append("#" + line if magic else line)
            placed.append(Cell(uri, text, len(lines), len(commented)))
            lines.extend(commented)
        return cls(key, path, version, "\n".join(lines) + "\n", tuple(placed))

    def uris(self) -> list[str]:
        """The editor documents this source publishes diagnostics to."""
        return [cell.uri for cell in self.cells] if self.cells is not None else [self.key]


@dataclass(frozen=True)
class Analysis:
    """review's findings on one :class:`Source`."""

    source: Source
    settings: ReviewSettings
    findings: tuple[Finding, ...]


def analyse(source: Source, settings: ReviewSettings, workspace: Workspace) -> Analysis:
    """Review the text of ``source`` as if it were the file at ``source.path``.

    review indexes the project files the text imports, as the editor holds
    them (the workspace's unsaved buffers, else the disk), and summarises only
    those whose text changed since the last analysis."""
    if settings.is_excluded(source.path):
        return Analysis(source, settings, ())  # `exclude`: as if review never saw it
    report = review_text(source.text, source.path, settings, workspace=workspace)
    return Analysis(source, settings, tuple(report.findings))


@dataclass(frozen=True)
class Place:
    """Where a piece of an analysed text is in the editor: a document and a range."""

    uri: str
    index: LineIndex  # of that document's text
    start: int  # character offsets into that document's text
    end: int


class Placer:
    """Maps findings and edits of an analysed text to editor documents."""

    def __init__(self, source: Source, encoding: str) -> None:
        self.source = source
        self.joined = LineIndex(source.text, encoding)
        self._cells = {cell.uri: LineIndex(cell.text, encoding) for cell in source.cells or ()}

    def finding_span(self, finding: Finding) -> tuple[int, int]:
        """A finding's character offsets into the analysed text."""
        start = self._offset(finding.line, finding.column)
        end = self._offset(finding.end_line, finding.end_column)
        return start, max(start, end)

    def _offset(self, line: int, column: int) -> int:
        if line > self.joined.line_count:
            return len(self.source.text)
        index = max(line, 1) - 1
        text = self.joined.line_text(index)
        return self.joined.starts[index] + min(max(column, 1) - 1, len(text))

    def place(self, start: int, end: int) -> Place | None:
        """Where ``[start, end)`` of the analysed text is; None when it spans cells.

        In a notebook, the place is found by line and column, not by offset: the
        joined text's magics carry an extra ``#`` and its line ends are ``\\n``."""
        if self.source.cells is None:
            return Place(self.source.key, self.joined, start, end)
        first_line, first_column = self.joined.locate(start)
        last_line, last_column = self.joined.locate(end)
        cell = self._cell_of(first_line)
        if cell is None:
            return None
        index = self._cells[cell.uri]
        inner_start = index.starts[first_line - cell.first_line] + first_column
        if last_line - cell.first_line == cell.line_count and last_column == 0:
            inner_end = len(cell.text)  # up to the cell's end (a whole last line)
        elif self._cell_of(last_line) is cell:
            inner_end = index.starts[last_line - cell.first_line] + last_column
        else:
            return None
        return Place(cell.uri, index, inner_start, inner_end)

    def _cell_of(self, line: int) -> Cell | None:
        for cell in self.source.cells or ():
            if cell.first_line <= line < cell.first_line + cell.line_count:
                return cell
        return None

    def index_of(self, uri: str) -> LineIndex:
        return self._cells.get(uri, self.joined)
