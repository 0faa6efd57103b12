"""The ``.npy`` header, read as ``numpy.lib.format.read_array`` reads it.

An ``.npy`` file is ``\\x93NUMPY``, a version (1.0, 2.0 or 3.0), a header length
(2 bytes for 1.0, 4 after), a header that is a Python literal dict with
``descr``, ``fortran_order`` and ``shape``, then the data. When the dtype holds
Python objects, the data is a **pickle**, which ``numpy.load(allow_pickle=True)``
unpickles right after the header (with ``allow_pickle`` numpy lifts its header
size limit, so any length is possible).

The header is parsed with :func:`ast.literal_eval` (a literal parser; it runs
nothing) when it is at most :data:`MAX_HEADER` characters. Whether the dtype
holds objects is read from ``descr`` conservatively: anything that is not
plainly a number, string, bytes or void type, or a list of fields made of them,
counts as "may hold objects", so what follows the header is judged as a pickle.
"""

from __future__ import annotations

import ast
import re
import struct
from dataclasses import dataclass
from typing import Any

from torchwise.ckpt.picklevm.source import ByteStream

MAGIC = b"\x93NUMPY"
#: headers longer than this are not parsed (numpy's own default limit is 10,000)
MAX_HEADER = 1 << 16
_LENGTHS = {(1, 0): ("<H", "latin1"), (2, 0): ("<I", "latin1"), (3, 0): ("<I", "utf8")}
# dtype strings that hold no Python object: byte order, then a kind and a size
_PLAIN = re.compile(r"[<>|=]?(?:[?bBhHiIlLqQpPefdgFDG]|[biufcmMSUaV]\d*(?:\[\w+\])?)")
_PLAIN_NAMES = frozenset(
    {
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64", "complex64", "complex128", "str", "bytes", "float",
        "int", "complex",
    }
)  # fmt: skip


@dataclass(frozen=True)
class NpyHeader:
    version: tuple[int, int]
    #: where the array data (or the object array's pickle) starts
    data_offset: int
    #: the dtype holds Python objects: True, False, or None when the header could not say
    has_object: bool | None
    shape: tuple[int, ...] | None
    #: why numpy.load refuses the header, or None
    error: str | None = None


def read_header(raw: ByteStream, start: int | None = 0) -> NpyHeader:
    """The header of the ``.npy`` data at ``start`` (None: where ``raw`` is, its byte 0)."""
    if start is None:
        start = 0
    else:
        raw.seek(start)
    head = raw.read(len(MAGIC) + 2) or b""
    if len(head) < len(MAGIC) + 2 or head[: len(MAGIC)] != MAGIC:
        return NpyHeader((0, 0), start, None, None, "the magic string is not correct")
    version = (head[-2], head[-1])
    if version not in _LENGTHS:
        return NpyHeader(version, start, None, None, f"format version {version} (numpy reads 1-3)")
    fmt, encoding = _LENGTHS[version]
    length_bytes = raw.read(struct.calcsize(fmt)) or b""
    if len(length_bytes) < struct.calcsize(fmt):
        return NpyHeader(version, start, None, None, "the header length is truncated")
    (length,) = struct.unpack(fmt, length_bytes)
    data_offset = start + len(head) + len(length_bytes) + length
    if length > MAX_HEADER:
        return NpyHeader(version, data_offset, None, None)  # too long to parse: may hold objects
    text = raw.read(length) or b""
    if len(text) < length:
        return NpyHeader(version, data_offset, None, None, "the header is truncated")
    try:
        header = ast.literal_eval(text.decode(encoding))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        # numpy retries Python 2 headers through a tokenizer: we cannot tell, so judge on
        return NpyHeader(version, data_offset, None, None)
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        return NpyHeader(version, data_offset, None, None, "the header is not numpy's dict")
    shape = header["shape"]
    if not (isinstance(shape, tuple) and all(isinstance(d, int) for d in shape)):
        return NpyHeader(version, data_offset, None, None, f"shape {shape!r} is not valid")
    return NpyHeader(version, data_offset, _has_object(header["descr"]), shape)


def _has_object(descr: Any, depth: int = 0) -> bool | None:
    """False when ``descr`` plainly holds no Python object; True or None (unsure) otherwise."""
    if depth > 32:
        return None
    if isinstance(descr, str):
        if _PLAIN.fullmatch(descr) or descr in _PLAIN_NAMES:
            return False
        if descr.lstrip("<>|=").startswith("O") or descr == "object":
            return True
        return None
    if isinstance(descr, list):
        verdicts = []
        for field in descr:
            if not (isinstance(field, tuple) and len(field) in (2, 3)):
                return None
            verdicts.append(_has_object(field[1], depth + 1))
        if any(v is True for v in verdicts):
            return True
        return None if None in verdicts else False
    if isinstance(descr, tuple) and len(descr) == 2:  # (base, shape) sub-array
        return _has_object(descr[0], depth + 1)
    return None
