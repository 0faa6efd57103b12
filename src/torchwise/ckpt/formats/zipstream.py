"""A zip member's bytes, decompressed on demand and within a byte budget.

miniz (torch's reader) extracts stored and deflate members into a buffer of the
size the central directory declares, and refuses a member whose data does not
fill it exactly; :class:`MemberStream` reads the same way and says afterwards
(:meth:`~MemberStream.extraction_error`) whether miniz would have refused it.
bzip2 and LZMA members, which miniz cannot read but Python's ``zipfile`` can,
are decompressed too, so a payload a zipfile-based loader would find is judged.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from typing import Any

from torchwise.ckpt.budgets import BudgetExceeded, Meter
from torchwise.ckpt.formats.zipdir import ZipError, ZipMember
from torchwise.ckpt.picklevm.source import ByteStream


class _Inflater:
    """One interface over deflate (8), bzip2 (12) and zip-LZMA (14), each bounded per call.

    miniz reads only deflate; the others are decoded so a payload hidden in a member
    that Python's zipfile (and a loader built on it) can read is judged too.
    """

    def __init__(self, method: int) -> None:
        self.method = method
        self.pending = b""  # zlib keeps unread input here; bz2/lzma keep it inside
        self.header = b""
        self.engine: Any = None
        if method == 8:
            self.engine = zlib.decompressobj(-15)
        elif method == 12:
            self.engine = bz2.BZ2Decompressor()

    @property
    def eof(self) -> bool:
        return bool(self.engine is not None and self.engine.eof)

    def wants_input(self) -> bool:
        if self.engine is None:
            return True
        if self.method == 8:
            return not self.pending
        return bool(self.engine.needs_input)

    def decompress(self, data: bytes, limit: int) -> bytes:
        if self.method == 14 and self.engine is None:
            data = self._lzma_header(data)
            if self.engine is None:
                return b""
        if self.method == 8:
            out: bytes = self.engine.decompress(self.pending + data, limit)
            self.pending = self.engine.unconsumed_tail
            return out
        result: bytes = self.engine.decompress(data, limit)
        return result

    def _lzma_header(self, data: bytes) -> bytes:
        # zip's LZMA: version (2 bytes), properties size (2), properties, then raw LZMA1.
        self.header += data
        if len(self.header) < 4:
            return b""
        (props_size,) = struct.unpack_from("<H", self.header, 2)
        if len(self.header) < 4 + props_size:
            return b""
        props = self.header[4 : 4 + props_size]
        filters = [lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)]  # type: ignore[attr-defined]
        self.engine = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters)
        rest, self.header = self.header[4 + props_size :], b""
        return rest


class MemberStream:
    """A member's uncompressed bytes, read on demand, within a byte budget.

    Reads stop at the size the central directory declares, as miniz's buffer does.
    :meth:`extraction_error` then says whether miniz would have refused the member
    (data that inflates to more or fewer bytes, a broken stream); ``crc`` is the
    checksum of what was read, which miniz (as torch builds it) never checks.
    """

    def __init__(
        self, raw: ByteStream, member: ZipMember, max_bytes: int, meter: Meter | None = None
    ) -> None:
        if member.data_offset < 0:
            raise ZipError(f"{member.name}: its local header is missing or broken")
        if member.method not in (0, 8, 12, 14):
            raise ZipError(f"{member.name}: compression method {member.method} is unreadable")
        if member.size > max_bytes:
            raise BudgetExceeded(f"member {member.name} ({member.size:,} bytes)", max_bytes, 0)
        self.raw = raw
        self.member = member
        self.position = member.data_offset  # next raw byte to read
        # miniz reads a stored member's declared (uncompressed) size, a deflated one's
        # compressed size
        self.remaining_in = member.size if member.method == 0 else member.compressed_size
        self.produced = 0
        self.limit = member.size
        self.inflater = _Inflater(member.method) if member.method else None
        self.error: str | None = None
        self.crc = 0
        #: the file's work budget: every byte produced counts, each time the member is read
        self.meter = meter

    def tell(self) -> int:
        return self.produced

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) not in ((self.produced, 0), (0, 1)):
            raise OSError("a compressed zip member is read front to back")
        return self.produced

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all that is left with -1); fewer only at the end."""
        want = self.limit - self.produced if n < 0 else min(n, self.limit - self.produced)
        out = bytearray()
        while len(out) < want:
            piece = self._produce(want - len(out))
            if not piece:
                break
            out += piece
        self.produced += len(out)
        self.crc = zlib.crc32(out, self.crc)
        if self.meter is not None:
            self.meter.charge_bytes(len(out), self.member.header_offset)
        return bytes(out)

    def _raw_chunk(self, n: int) -> bytes:
        if self.remaining_in <= 0:
            return b""
        self.raw.seek(self.position)
        data = self.raw.read(min(n, self.remaining_in)) or b""
        self.position += len(data)
        self.remaining_in = self.remaining_in - len(data) if data else 0
        return data

    def _produce(self, want: int) -> bytes:
        if self.inflater is None:
            return self._raw_chunk(min(want, 1 << 24))
        while not self.inflater.eof:
            feed = self._raw_chunk(1 << 16) if self.inflater.wants_input() else b""
            if not feed and self.inflater.wants_input():
                return b""
            try:
                data = self.inflater.decompress(feed, want)
            except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as exc:
                self.error = f"broken compressed data ({exc})"
                self.remaining_in = 0
                return b""
            if data:
                return data
        return b""

    def extraction_error(self) -> str | None:
        """After reading to the end: why miniz would refuse this member, or None."""
        if self.inflater is not None and not self.error:
            if self.produced >= self.limit and self._produce(1):
                return "it inflates to more bytes than the directory declares"
            if self.produced >= self.limit and not self.inflater.eof and not self.error:
                return "its compressed stream does not end where the directory says"
        if self.error:
            return self.error
        if self.produced < self.limit:
            return f"it holds {self.produced:,} of the {self.limit:,} bytes it declares"
        return None
