"""joblib's compressed files, decompressed as ``joblib.load`` decompresses them.

``joblib.load`` looks at a file's first bytes (``_detect_compressor``): ``ZF``
is the pre-0.10 format (a hexadecimal length, then zlib); otherwise the first
registered compressor whose prefix matches wraps the file: zlib (``x``),
gzip (``\\x1f\\x8b``), bz2 (``BZ``), xz (``\\xfd7zXZ``), lzma (``]\\x00``) and lz4
(``\\x04\\x22\\x4d\\x18``, when the lz4 package is installed). Then it unpickles
the decompressed stream. A scanner that only reads pickles at byte 0 sees none
of them.

:class:`DecompressedStream` gives the decompressed bytes as a forward-only
stream, a chunk at a time, each produced byte charged to the file's
:class:`~torchwise.ckpt.budgets.Meter` (so a bomb ends as "too large to vet").
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from typing import Any, cast

from torchwise.ckpt.budgets import Meter
from torchwise.ckpt.picklevm.source import ByteStream

#: joblib's prefixes, in the order ``_detect_compressor`` tries them (compat first)
PREFIXES: tuple[tuple[str, bytes], ...] = (
    ("compat", b"ZF"),
    ("zlib", b"\x78"),
    ("gzip", b"\x1f\x8b"),
    ("bz2", b"BZ"),
    ("xz", b"\xfd\x37\x7a\x58\x5a"),
    ("lzma", b"\x5d\x00"),
    ("lz4", b"\x04\x22\x4d\x18"),
)
#: ``len(hex(2**64))``: the compat header's length field
_COMPAT_DIGITS = 19
_CHUNK = 1 << 16


class CannotDecompress(Exception):
    """The scan cannot decompress this stream (lz4 without the lz4 package)."""


def detect(head: bytes) -> str | None:
    """The compressor joblib would pick for a file starting with ``head``, or None."""
    return next((name for name, prefix in PREFIXES if head.startswith(prefix)), None)


class DecompressedStream:
    """The decompressed bytes of a joblib file, read front to back."""

    def __init__(self, raw: ByteStream, kind: str, meter: Meter) -> None:
        raw.seek(0)
        self.raw = raw
        self.meter = meter
        self.position = 0
        self.pending = b""
        self.ended = False
        self.declared: int | None = None
        self.engine: Any = None
        self.file: Any = None
        if kind == "compat":
            self._compat_header()
            self.engine = zlib.decompressobj(15)
        elif kind in ("zlib", "gzip"):
            self.engine = zlib.decompressobj(15 if kind == "zlib" else 31)
        elif kind == "bz2":
            self.file = bz2.BZ2File(cast(Any, raw))
        elif kind in ("xz", "lzma"):
            self.file = lzma.LZMAFile(cast(Any, raw))  # noqa: SIM115
        else:
            self.file = _lz4_file(raw)

    def _compat_header(self) -> None:
        """``read_zfile``: ``ZF``, the length in hexadecimal, an optional space, then zlib."""
        header = self.raw.read(2 + _COMPAT_DIGITS) or b""
        try:
            self.declared = int(header[2:], 16)
        except ValueError:
            self.ended = True
            return
        if (self.raw.read(1) or b"") != b" ":
            self.raw.seek(len(header))

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) not in ((self.position, 0), (0, 1)):
            raise OSError("a compressed stream is read front to back")
        return self.position

    def read(self, n: int = -1) -> bytes:
        want = n if n >= 0 else 1 << 62
        out = bytearray()
        while len(out) < want:
            if self.pending:
                take = self.pending[: want - len(out)]
                self.pending = self.pending[len(take) :]
                out += take
                continue
            piece = self._produce(min(want - len(out), _CHUNK))
            if not piece:
                break
            self.pending = piece
        self.position += len(out)
        return bytes(out)

    def _produce(self, limit: int) -> bytes:
        if self.ended:
            return b""
        try:
            if self.file is not None:
                data: bytes = self.file.read(limit)
            else:
                data = self._inflate(limit)
        except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError):
            data = b""
        if not data:
            self.ended = True
        self.meter.charge_bytes(len(data), self.position)
        return data

    def _inflate(self, limit: int) -> bytes:
        while not self.engine.eof:
            if self.engine.unconsumed_tail:
                data: bytes = self.engine.decompress(self.engine.unconsumed_tail, limit)
            else:
                raw = self.raw.read(_CHUNK) or b""
                if not raw:
                    return b""
                data = self.engine.decompress(raw, limit)
            if data:
                return data
        return b""


def _lz4_file(raw: ByteStream) -> Any:
    try:
        from lz4.frame import LZ4FrameFile
    except ImportError:
        raise CannotDecompress(
            "an lz4-compressed joblib file: install the lz4 package so the scan can read it"
        ) from None
    return LZ4FrameFile(raw, mode="rb")
