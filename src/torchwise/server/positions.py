"""Positions: review's places in a text, as the editor counts them.

review reports 1-based lines and columns counted in characters (code points),
and fix edits as 0-based character offsets into the text. The Language Server
Protocol counts 0-based lines and, within a line, code units of the encoding the
client and server agreed on at start-up: UTF-16 unless both chose otherwise, so
a character outside the Basic Multilingual Plane (an emoji in a string) counts
two. Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (the protocol's definition and
Python's; not the other separators ``str.splitlines`` knows).
"""

from __future__ import annotations

import bisect
import re

from lsprotocol import types

_LINE_END = re.compile(r"\r\n|\r|\n")


def _units(text: str, encoding: str) -> int:
    """How many code units of ``encoding`` the characters of ``text`` take."""
    if encoding == types.PositionEncodingKind.Utf32 or text.isascii():
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


class LineIndex:
    """Where each line of one text starts, to turn offsets into positions and back."""

    def __init__(self, text: str, encoding: str = types.PositionEncodingKind.Utf16) -> None:
        self.text = text
        self.encoding = encoding
        self.starts = [0, *(match.end() for match in _LINE_END.finditer(text))]

    def _line_text(self, line: int) -> str:
        """Line ``line`` (0-based) without its line end."""
        start = self.starts[line]
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def locate(self, offset: int) -> tuple[int, int]:
        """The 0-based line and character column of a character offset (clamped)."""
        offset = min(max(offset, 0), len(self.text))
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, min(offset - self.starts[line], len(self._line_text(line)))

    def position(self, offset: int) -> types.Position:
        """The position of a character offset (clamped to the text)."""
        line, column = self.locate(offset)
        return types.Position(
            line=line, character=_units(self._line_text(line)[:column], self.encoding)
        )

    def at(self, line: int, column: int) -> types.Position:
        """The position of review's 1-based ``line`` and character ``column``."""
        if line > len(self.starts):
            return self.position(len(self.text))
        index = max(line, 1) - 1
        text = self._line_text(index)
        return types.Position(
            line=index, character=_units(text[: max(column, 1) - 1], self.encoding)
        )

    def offset(self, position: types.Position) -> int:
        """The character offset of a position (clamped to its line)."""
        if position.line >= len(self.starts):
            return len(self.text)
        text = self._line_text(position.line)
        if self.encoding == types.PositionEncodingKind.Utf32 or text.isascii():
            column = min(position.character, len(text))
        else:
            column, units = 0, 0
            while column < len(text) and units < position.character:
                units += _units(text[column], self.encoding)
                column += 1
        return self.starts[position.line] + column

    def range(self, start: int, end: int) -> types.Range:
        """The range of the characters ``[start, end)``."""
        return types.Range(start=self.position(start), end=self.position(end))

    @property
    def line_count(self) -> int:
        return len(self.starts)

    def line_text(self, line: int) -> str:
        """Line ``line`` (0-based) without its line end; '' past the end."""
        return self._line_text(line) if 0 <= line < len(self.starts) else ""
