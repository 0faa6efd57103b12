"""safetensors: a JSON header and raw tensor bytes; loading it runs no code.

A file is safetensors to a loader when its first 8 bytes are a little-endian
header length and the header that follows is a JSON object (``safe_open``). It
matters here only for which loaders read a file: a file that is safetensors and
nothing else is safe, one that is also a pickle is judged as the pickle.
"""

from __future__ import annotations

import json
import struct

from torchwise.ckpt.formats.container import Container, SafetensorsEntry
from torchwise.ckpt.loaders.names import SAFETENSORS
from torchwise.ckpt.picklevm.source import ByteStream


def looks_like_safetensors(head: bytes, size: int) -> bool:
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= size - 8 and head[8:9] == b"{"


_ST_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
             "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
             "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1, "C64": 8}  # fmt: skip


def read_safetensors(container: Container, raw: ByteStream, size: int) -> None:
    """Fill ``container`` from the safetensors header (``container.failure`` if it is broken)."""
    container.format = "safetensors"
    raw.seek(0)
    (n,) = struct.unpack("<Q", raw.read(8) or b"")
    try:
        header = json.loads((raw.read(n) or b"").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        container.route(SAFETENSORS, f"safetensors header is not valid JSON ({exc})")
        return
    if not isinstance(header, dict):
        container.route(SAFETENSORS, "safetensors header is not a JSON object")
        return
    data_size = size - 8 - n
    for name, entry in header.items():
        if name == "__metadata__":
            container.metadata = dict(entry) if isinstance(entry, dict) else {}
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            numel = 1
            for dim in shape:
                numel *= int(dim)
        except (KeyError, TypeError, ValueError):
            container.route(SAFETENSORS, f"safetensors entry {name!r} is malformed")
            return
        if not 0 <= begin <= end <= data_size:
            container.route(SAFETENSORS, f"tensor {name!r} lies outside the file (truncated?)")
            return
        if dtype in _ST_SIZES and numel * _ST_SIZES[dtype] != end - begin:
            container.route(SAFETENSORS, f"tensor {name!r}: {end - begin} bytes for {dtype}{shape}")
            return
        container.safetensors.append(SafetensorsEntry(name, dtype, tuple(shape), end - begin))
    container.route(SAFETENSORS, None)
