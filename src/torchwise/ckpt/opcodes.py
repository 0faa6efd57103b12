"""A fast pickle opcode decoder: ``pickletools.genops`` semantics, buffered reads.

``genops`` reads its input a byte at a time through the stream, which dominates
the cost on a zip member (a 5,000-tensor state dict is ~200k opcodes). This
decoder reads growing chunks (up to 256 KiB), decodes the binary opcodes with ``struct`` on the
buffer, and hands the rare text opcodes of protocols 0-1 to ``pickletools``'
own argument readers, so the values are exactly what ``genops`` yields. Byte
strings longer than :data:`LARGE` are skipped, not kept: they are raw data (a
NumPy array's buffer) and only their length matters for scanning.
"""

from __future__ import annotations

import io
import pickletools
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

_CHUNK = 1 << 18
LARGE = 1 << 20


@dataclass(frozen=True)
class SkippedBytes:
    """A byte string too long to keep; its length is all a scan needs."""

    length: int

    def __repr__(self) -> str:
        return f"<{self.length} bytes>"


_NONE, _FIXED, _COUNTED, _LINES = range(4)
_FIXED_ARGS = {"uint1": "<B", "uint2": "<H", "int4": "<i", "uint4": "<I", "uint8": "<Q",
               "float8": ">d"}  # fmt: skip
_COUNTED_ARGS = {
    "string1": ("<B", "latin1"), "string4": ("<i", "latin1"), "bytes1": ("<B", "bytes"),
    "bytes4": ("<I", "bytes"), "bytes8": ("<Q", "bytes"), "bytearray8": ("<Q", "bytearray"),
    "unicodestring1": ("<B", "utf8"), "unicodestring4": ("<I", "utf8"),
    "unicodestring8": ("<Q", "utf8"), "long1": ("<B", "long"), "long4": ("<i", "long"),
}  # fmt: skip


def _table() -> dict[int, tuple[str, int, struct.Struct | None, Any]]:
    """opcode byte -> (name, argument kind, its struct, payload decoding or line count)."""
    table: dict[int, tuple[str, int, struct.Struct | None, Any]] = {}
    for op in pickletools.opcodes:
        arg = op.arg
        if arg is None:
            entry: tuple[str, int, struct.Struct | None, Any] = (op.name, _NONE, None, None)
        elif arg.name in _FIXED_ARGS:
            entry = (op.name, _FIXED, struct.Struct(_FIXED_ARGS[arg.name]), None)
        elif arg.name in _COUNTED_ARGS:
            fmt, how = _COUNTED_ARGS[arg.name]
            entry = (op.name, _COUNTED, struct.Struct(fmt), how)
        else:  # newline-terminated text (protocols 0-1): GLOBAL and INST read two lines
            entry = (op.name, _LINES, None, 2 if arg.name == "stringnl_noescape_pair" else 1)
        table[ord(op.code)] = entry
    return table


_TABLE = _table()
_READERS = {ord(op.code): op.arg.reader for op in pickletools.opcodes if op.arg is not None}


class _Buffer:
    def __init__(self, stream: IO[bytes], start: int) -> None:
        self.stream = stream
        self.data = bytearray()
        self.base = start  # stream offset of data[0]
        self.chunk = 512

    def fill(self, end: int) -> None:
        """Make data[:end] available."""
        while len(self.data) < end:
            chunk = self.stream.read(min(max(self.chunk, end - len(self.data)), 1 << 26))
            if not chunk:
                raise ValueError("truncated pickle: it ends in the middle of an opcode")
            self.data += chunk
            # Start small (the legacy format's header pickles are a few bytes, and
            # overshoot is re-read), grow geometrically for long pickles.
            self.chunk = min(self.chunk * 2, _CHUNK)

    def drop(self, pos: int) -> int:
        """Forget data[:pos] (keeps memory flat on long pickles); returns the new pos."""
        del self.data[:pos]
        self.base += pos
        return 0

    def skip(self, pos: int, n: int) -> int:
        """Consume n bytes from pos without keeping them; returns the new pos."""
        have = len(self.data) - pos
        if have >= n:
            return pos + n
        pos = self.drop(len(self.data))
        left = n - have
        while left:
            chunk = self.stream.read(min(left, 1 << 24))
            if not chunk:
                raise ValueError("truncated pickle: it ends inside a byte string")
            left -= len(chunk)
            self.base += len(chunk)
        return pos

    def find_lines(self, pos: int, count: int) -> int:
        """End offset (exclusive) of ``count`` newline-terminated lines from pos."""
        end = pos
        for _ in range(count):
            while (nl := self.data.find(b"\n", end)) < 0:
                before = len(self.data)
                try:
                    self.fill(before + 1)
                except ValueError:
                    raise ValueError("truncated pickle: no newline ends a text argument") from None
            end = nl + 1
        return end


def decode(stream: IO[bytes], start: int, rewind: bool) -> Iterator[tuple[str, Any, int]]:
    """Yield (opcode name, argument, stream offset) up to and including STOP.

    Chunked reads overshoot STOP; with ``rewind`` the stream is sought back to just
    after it, so stacked pickles (the legacy format) can be read one after another.
    """
    buf = _Buffer(stream, start)
    data, pos = buf.data, 0
    table, fill = _TABLE, buf.fill
    while True:
        if pos > LARGE:
            pos = buf.drop(pos)
        if pos >= len(data):
            fill(pos + 1)
        code = data[pos]
        at = buf.base + pos
        entry = table.get(code)
        if entry is None:
            raise ValueError(f"at position {at}, opcode {bytes([code])!r} unknown")
        name, kind, st, extra = entry
        pos += 1
        arg: Any = None
        if kind == _FIXED:
            assert st is not None
            if len(data) < pos + st.size:
                fill(pos + st.size)
            arg = st.unpack_from(data, pos)[0]
            pos += st.size
        elif kind == _COUNTED:
            assert st is not None
            if len(data) < pos + st.size:
                fill(pos + st.size)
            n = st.unpack_from(data, pos)[0]
            pos += st.size
            if n < 0:
                raise ValueError(f"at position {at}, negative length {n}")
            if n > LARGE and extra in ("bytes", "bytearray"):
                arg, pos = SkippedBytes(n), buf.skip(pos, n)
            else:
                if len(data) < pos + n:
                    fill(pos + n)
                arg = _payload(bytes(data[pos : pos + n]), extra)
                pos += n
        elif kind == _LINES:  # exactly what pickletools decodes the text to
            end = buf.find_lines(pos, extra)
            arg = _READERS[code](io.BytesIO(bytes(data[pos:end])))
            pos = end
        if name == "STOP":
            if rewind:  # before the yield: the consumer stops iterating at STOP
                stream.seek(buf.base + pos)
            yield name, arg, at
            return
        yield name, arg, at


def _payload(raw: bytes, how: str) -> Any:
    if how == "utf8":
        return raw.decode("utf-8", "surrogatepass")
    if how == "latin1":
        return raw.decode("latin-1")
    if how == "long":
        return int.from_bytes(raw, "little", signed=True)
    if how == "bytearray":
        return bytearray(raw)
    return raw
