"""The bytes of one pickle, read the way the C unpickler reads them.

:class:`Source` hands the machine exactly what ``_Unpickler_Read`` and
``_Unpickler_Readline`` would: ``n`` bytes or "pickle data was truncated", a
line only when a ``\\n`` ends it. It reads the stream in growing chunks (a
5,000-tensor state dict is about 200,000 opcodes; a byte at a time through the
stream would dominate the cost), knows the stream offset of every byte for
evidence, skips long byte strings without keeping them, and charges every byte
to the per-pickle byte budget.
"""

from __future__ import annotations

import codecs
import struct
from dataclasses import dataclass
from typing import Protocol

from torchwise.ckpt.budgets import BudgetExceeded

_U32 = struct.Struct("<I")
#: byte strings longer than this are skipped, not kept (only their length matters)
LARGE = 1 << 20
_FIRST_CHUNK = 512
_MAX_CHUNK = 1 << 20
#: a text opcode's line longer than this is too large to vet
_MAX_LINE = 16 << 20


class ByteStream(Protocol):
    """What the readers need of a file: a file, a zip member, a window on a tar member."""

    def read(self, size: int = -1, /) -> bytes | None: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def tell(self) -> int: ...


class Truncated(Exception):
    """The stream ended inside an opcode: the C unpickler raises here."""


@dataclass(frozen=True)
class SkippedBytes:
    """A byte string too long to keep; its length is all a scan needs."""

    length: int

    def __repr__(self) -> str:
        return f"<{self.length} bytes>"


@dataclass(frozen=True)
class SkippedText:
    """A text string too long to keep (validated as UTF-8 while skipping)."""

    length: int
    head: str

    def __repr__(self) -> str:
        return f"<{self.length}-byte string {self.head[:20]!r}...>"


class Source:
    """One pickle's bytes from ``stream``, starting at stream offset ``start``."""

    def __init__(
        self,
        stream: ByteStream,
        start: int,
        max_bytes: int,
        size: int | None = None,
        seekable: bool = True,
    ) -> None:
        self.stream = stream
        self.start = start
        self.base = start  # stream offset of buf[0]
        self.buf = b""
        self.pos = 0
        self.chunk = _FIRST_CHUNK
        self.max_bytes = max_bytes
        #: where the stream ends, when known (frames and lengths are checked against it)
        self.size = size
        self.seekable = seekable
        #: bytes passed over by seeking (they cost nothing, so the byte budget leaves them out)
        self.sought = 0

    @property
    def offset(self) -> int:
        """Stream offset of the next byte."""
        return self.base + self.pos

    def remaining(self) -> int | None:
        return None if self.size is None else self.size - self.offset

    def _ensure(self, n: int) -> None:
        """Make ``n`` bytes available from ``pos``, or raise :class:`Truncated`."""
        if not self._fill(n):
            raise Truncated("pickle data was truncated")

    def _fill(self, n: int) -> bool:
        """Read until ``n`` bytes are available from ``pos``; False if the stream ends
        first (what it had is kept in the buffer)."""
        if self.offset - self.sought + n - self.start > self.max_bytes:
            raise BudgetExceeded("the pickle's size in bytes", self.max_bytes, self.offset)
        parts = [self.buf[self.pos :]]
        self.base += self.pos
        self.pos = 0
        have = len(parts[0])
        while have < n:
            data = self.stream.read(max(self.chunk, n - have)) or b""
            if not data:
                self.buf = b"".join(parts)
                return False
            parts.append(data)
            have += len(data)
            self.chunk = min(self.chunk * 2, _MAX_CHUNK)
        self.buf = b"".join(parts)
        return True

    def u8(self) -> int:
        """One unsigned byte (the fast path is inline: this runs for most opcodes)."""
        pos = self.pos
        if pos < len(self.buf):
            self.pos = pos + 1
            return self.buf[pos]
        return self.take(1)[0]

    def u32(self) -> int:
        """A little-endian unsigned 32-bit integer."""
        pos = self.pos
        end = pos + 4
        if end <= len(self.buf):
            self.pos = end
            value: int = _U32.unpack_from(self.buf, pos)[0]
            return value
        value = _U32.unpack(self.take(4))[0]
        return value

    def take(self, n: int) -> bytes:
        """Exactly ``n`` bytes."""
        pos = self.pos
        if len(self.buf) - pos < n:
            self._ensure(n)
            pos = self.pos
        self.pos = pos + n
        return self.buf[pos : pos + n]

    def line(self) -> bytes:
        """Bytes up to and including the next ``\\n`` (a line must end with one)."""
        newline = self.buf.find(b"\n", self.pos)
        while newline < 0:
            have = len(self.buf) - self.pos
            if have > _MAX_LINE:
                raise BudgetExceeded("a text argument's length", _MAX_LINE, self.offset)
            # Ask for more than the line needs (it is not known yet), but a stream that
            # ends sooner may still hold the newline: only its absence is truncation.
            more = self._fill(have + min(max(have, _FIRST_CHUNK), _MAX_CHUNK))
            newline = self.buf.find(b"\n", self.pos + have)
            if newline < 0 and not more:
                raise Truncated("pickle data was truncated")
        start = self.pos
        self.pos = newline + 1
        return self.buf[start : newline + 1]

    def skip(self, n: int) -> None:
        """Consume ``n`` bytes without keeping them."""
        have = len(self.buf) - self.pos
        if have >= n:
            self.pos += n
            return
        seeks = self.seekable and self.size is not None
        if not seeks and self.offset + n - self.start > self.max_bytes:
            # only bytes that must be read count: a seek past them costs nothing
            raise BudgetExceeded("the pickle's size in bytes", self.max_bytes, self.offset)
        left = n - have
        end_of_buffer = self.base + len(self.buf)
        self.base, self.buf, self.pos = end_of_buffer, b"", 0
        if seeks:
            assert self.size is not None
            if end_of_buffer + left > self.size:
                raise Truncated("pickle data was truncated")
            self.stream.seek(end_of_buffer + left)
            self.sought += left
        else:
            while left:
                data = self.stream.read(min(left, _MAX_CHUNK)) or b""
                if not data:
                    raise Truncated("pickle data was truncated")
                left -= len(data)
        self.base = end_of_buffer + (n - have)

    def skip_text(self, n: int) -> SkippedText:
        """Skip ``n`` bytes of UTF-8 (surrogates allowed, as BINUNICODE decodes)."""
        decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
        head = ""
        left = n
        while left:
            piece = self.take(min(left, _MAX_CHUNK))
            left -= len(piece)
            text = decoder.decode(piece, final=not left)  # raises UnicodeDecodeError
            head = head or text[:40]
        return SkippedText(n, head)

    def rewind(self) -> None:
        """Seek the stream back to just after the last byte consumed (stacked pickles)."""
        self.stream.seek(self.offset)
