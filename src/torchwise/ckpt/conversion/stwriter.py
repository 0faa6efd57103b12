"""Write a safetensors file one tensor at a time, then read every byte back.

safetensors' own ``save_file`` needs every tensor in memory at once. This writer
lays out the header first (shapes and dtypes are known from torch's meta load),
then copies each tensor's bytes from the checkpoint straight into the file:
a contiguous tensor in chunks, a strided one from the span of storage it covers,
a few rows at a time. Peak memory is about the largest strided tensor's storage
span plus one chunk; for contiguous tensors, one chunk.

Every tensor's bytes are hashed as they are written; :func:`verify` reads the
file back through ``safetensors.safe_open`` and checks dtype, shape and the hash
of every tensor, so what the file says is what was meant to be written.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from torchwise.ckpt.conversion.plan import SAFETENSORS_NAMES, Item

if TYPE_CHECKING:
    import torch

CHUNK = 16 << 20
Progress = Callable[[int, str], None]


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def header_bytes(items: list[Item], metadata: dict[str, str]) -> bytes:
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for item in items:
        size = _nbytes(item.tensor)
        header[item.key] = {
            "dtype": SAFETENSORS_NAMES[str(item.tensor.dtype).removeprefix("torch.")],
            "shape": list(item.tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    return struct.pack("<Q", len(text)) + text


def write(
    out: BinaryIO,
    items: list[Item],
    metadata: dict[str, str],
    *,
    swap_bytes: bool = False,
    progress: Progress | None = None,
) -> tuple[dict[str, str], int]:
    """Write the file; returns (key -> sha256 of its bytes, the largest buffer held)."""
    out.write(header_bytes(items, metadata))
    digests: dict[str, str] = {}
    peak = 0
    with contextlib.ExitStack() as files:
        opened: dict[Path, io.BufferedReader] = {}
        for item in items:
            digest = hashlib.sha256()
            if item.source is None:
                peak = max(peak, _write_tensor(out, item.tensor, digest))
            else:
                path, at = item.source
                if path not in opened:
                    opened[path] = files.enter_context(path.open("rb"))
                peak = max(peak, _stream(out, item.tensor, at, opened[path], digest, swap_bytes))
            digests[item.key] = digest.hexdigest()
            if progress is not None:
                progress(_nbytes(item.tensor), item.key)
    return digests, peak


def _emit(out: BinaryIO, data: Any, digest: Any) -> None:
    digest.update(data)
    out.write(data)


def _as_bytes(tensor: torch.Tensor) -> memoryview:
    import torch

    flat = tensor.contiguous().reshape(-1)
    if not flat.numel():
        return memoryview(b"")
    array: Any = flat.view(torch.uint8).numpy()
    return memoryview(array)


def _write_tensor(out: BinaryIO, tensor: torch.Tensor, digest: Any) -> int:
    """A tensor in memory, a block of rows at a time (a strided one is never copied whole)."""
    if tensor.dim() == 0 or tensor.is_contiguous() or _nbytes(tensor) <= CHUNK:
        _emit(out, _as_bytes(tensor), digest)
        return _nbytes(tensor)
    row = max(1, _nbytes(tensor) // tensor.shape[0])
    step = max(1, CHUNK // row)
    for start in range(0, tensor.shape[0], step):
        _emit(out, _as_bytes(tensor[start : start + step]), digest)
    return min(_nbytes(tensor), step * row)


def _stream(
    out: BinaryIO,
    tensor: torch.Tensor,
    at: int,
    source: io.BufferedReader,
    digest: Any,
    swap: bool,
) -> int:
    """A tensor whose storage's bytes are still in the checkpoint file, at byte ``at``."""
    size = tensor.element_size()
    start = at + int(tensor.storage_offset()) * size
    if tensor.is_contiguous():
        left = _nbytes(tensor)
        source.seek(start)
        while left:
            chunk = source.read(min(left, CHUNK))
            if not chunk:
                raise OSError("the checkpoint ended inside a tensor")
            _emit(out, _swapped(chunk, tensor, size) if swap else chunk, digest)
            left -= len(chunk)
        return min(_nbytes(tensor), CHUNK)
    return _stream_strided(out, tensor, start, source, digest, swap)


def _stream_strided(
    out: BinaryIO,
    tensor: torch.Tensor,
    start: int,
    source: io.BufferedReader,
    digest: Any,
    swap: bool,
) -> int:
    import torch

    size = tensor.element_size()
    # The elements it touches: storage_offset .. storage_offset + sum((n - 1) * stride).
    span = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True) if n)
    source.seek(start)
    raw = bytearray(span * size)  # read into it: read() would hold a second copy meanwhile
    view, filled = memoryview(raw), 0
    while filled < len(raw):
        n = source.readinto(view[filled : filled + CHUNK])
        if not n:
            raise OSError("the checkpoint ended inside a tensor")
        filled += n
    if swap:
        raw = bytearray(_swapped(bytes(raw), tensor, size))
    base = torch.frombuffer(raw, dtype=tensor.dtype)
    real = base.as_strided(tuple(tensor.shape), tensor.stride(), 0)
    return len(raw) + _write_tensor(out, real, digest)


def _swapped(chunk: bytes, tensor: torch.Tensor, size: int) -> bytes:
    """A big-endian checkpoint's bytes in little-endian order (torch's ``byteswap``)."""
    import numpy as np

    unit = size // 2 if tensor.is_complex() else size
    if unit == 1:
        return chunk
    return np.frombuffer(chunk, dtype=f">u{unit}").astype(f"<u{unit}").tobytes()


def verify(path: Path, items: list[Item], digests: dict[str, str]) -> int:
    """Read every tensor back from ``path``; returns how many matched, raises on a mismatch.

    safetensors itself parses the file (``safe_open``) and must report each key's dtype and
    shape; the bytes at the offsets of its header are then read with plain reads and hashed
    (not through safetensors' memory map, whose pages would count as this process's memory).
    """
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        for item in items:
            piece = handle.get_slice(item.key)
            expected = SAFETENSORS_NAMES[str(item.tensor.dtype).removeprefix("torch.")]
            if piece.get_dtype() != expected or piece.get_shape() != list(item.tensor.shape):
                raise ValueError(f"round trip failed for {item.key}: dtype or shape")
    with path.open("rb") as raw:
        (size,) = struct.unpack("<Q", raw.read(8))
        header = json.loads(raw.read(size))
        checked = 0
        for item in items:
            begin, end = header[item.key]["data_offsets"]
            raw.seek(8 + size + begin)
            digest, left = hashlib.sha256(), end - begin
            while left:
                chunk = raw.read(min(left, CHUNK))
                if not chunk:
                    break
                digest.update(chunk)
                left -= len(chunk)
            if left or digest.hexdigest() != digests[item.key]:
                raise ValueError(f"round trip failed for {item.key}: its bytes differ")
            checked += 1
    return checked
