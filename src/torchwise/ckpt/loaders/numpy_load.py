"""``numpy.load(allow_pickle=True)``'s route: ``.npy`` object arrays, ``.npz`` members, pickles.

``numpy.load`` reads the first 6 bytes (``numpy/lib/_npyio_impl.py``):

- ``PK\\x03\\x04`` or ``PK\\x05\\x06``: an ``.npz``, opened with **Python's**
  ``zipfile`` (its view of the archive, not miniz's: the last of two
  same-named members, names cut at NUL, a relocated directory). Each member a
  user reads whose bytes start with ``\\x93NUMPY`` goes through ``read_array``;
  any other member comes back as bytes;
- ``\\x93NUMPY``: ``read_array``: after the header, a dtype holding Python
  objects is a pickle, unpickled with ``pickle.load``;
- anything else: ``pickle.load`` from byte 0 (the same opcodes
  :mod:`torchwise.ckpt.loaders.torch_load` reads as the stacked pickles).
"""

from __future__ import annotations

import io
import zipfile
from typing import Any, cast

from torchwise.ckpt.budgets import Meter
from torchwise.ckpt.formats import npy
from torchwise.ckpt.formats.container import Container, PickleMember
from torchwise.ckpt.loaders.names import NUMPY_LOAD
from torchwise.ckpt.picklevm.machine import run_pickle
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.ckpt.picklevm.values import PickleResult

_ZIP_HEADS = (b"PK\x03\x04", b"PK\x05\x06")
_READ = 1 << 16


def read_numpy_route(
    container: Container, raw: ByteStream, size: int, head: bytes, meter: Meter
) -> None:
    """Record on ``container`` what numpy.load(allow_pickle=True) unpickles from the file."""
    if head.startswith(_ZIP_HEADS):
        _npz(container, raw, meter)
    elif head.startswith(npy.MAGIC):
        _npy(container, raw, size, meter)
    else:
        first = next((p for p in container.pickles if p.name.startswith("pickle #1 ")), None)
        if first is None:
            container.route(NUMPY_LOAD, "not an .npy, an .npz or a pickle")
            return
        first.also(NUMPY_LOAD)
        stop = first.result.stop
        container.route(NUMPY_LOAD, None if stop is None else stop.message)


def _npy(container: Container, raw: ByteStream, size: int, meter: Meter) -> None:
    header = npy.read_header(raw)
    if header.error is not None:
        container.route(NUMPY_LOAD, f"an .npy file numpy refuses: {header.error}")
        return
    container.format = "npy"
    if header.has_object is False:
        container.notes.append("an .npy array without Python objects: numpy.load unpickles nothing")
        container.route(NUMPY_LOAD, None)
        return
    result = run_pickle(raw, header.data_offset, meter=meter, size=size)
    _add(container, "npy object array data", result, weak=header.has_object is None)
    container.route(NUMPY_LOAD, None)


def _npz(container: Container, raw: ByteStream, meter: Meter) -> None:
    raw.seek(0)
    try:
        archive = zipfile.ZipFile(cast(Any, raw))
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        container.route(NUMPY_LOAD, f"Python's zipfile cannot open it as an .npz ({exc})")
        return
    container.route(NUMPY_LOAD, None)
    arrays = 0
    for info in infos:
        meter.charge_opcodes(1, info.header_offset)
        member = _open_member(archive, info)
        if member is None:
            continue
        with member:
            head = _read(member, len(npy.MAGIC), meter, info.header_offset)
            if head != npy.MAGIC:
                continue
            arrays += 1
            stream = io.BufferedReader(_Prefixed(head, member, meter, info.header_offset))
            header = npy.read_header(stream, None)
            if header.error is not None or header.has_object is False:
                continue
            result = run_pickle(stream, header.data_offset, meter=meter, seekable=False)
            _add(container, f"npz:{info.filename} object array data", result,
                 header.has_object is None)  # fmt: skip
    if not arrays:
        container.notes.append(
            "numpy.load opens it as an .npz, but none of its members is an array"
        )


def _open_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Any:
    """A member as ``zipfile`` extracts it, or None where zipfile refuses it."""
    try:
        member = archive.open(info)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError):
        return None
    # numpy stops reading at the pickle's STOP, so zipfile's CRC check at the end of the
    # member never runs: the bytes are judged whatever their checksum
    if hasattr(member, "_expected_crc"):
        member._expected_crc = None
    return member


def _read(member: Any, n: int, meter: Meter, offset: int) -> bytes:
    try:
        data: bytes = member.read(n)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError):
        return b""  # zipfile stops here: numpy.load raises when it reads this far
    meter.charge_bytes(len(data), offset)
    return data


class _Prefixed(io.RawIOBase):
    """A member's bytes from its start (``head`` already read), forward only, charged."""

    def __init__(self, head: bytes, member: Any, meter: Meter, offset: int) -> None:
        super().__init__()
        self.head, self.member, self.meter, self.offset = head, member, meter, offset
        self.position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.position < len(self.head):
            data = self.head[self.position : self.position + len(buffer)]
        else:
            data = _read(self.member, len(buffer), self.meter, self.offset)
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)


def _add(container: Container, name: str, result: PickleResult, weak: bool) -> None:
    """Judge what follows the header; when the dtype was unclear, only if it is a pickle."""
    if weak and not (result.complete or result.globals or result.calls or result.anomalies):
        return
    container.pickles.append(PickleMember(name, "array", (NUMPY_LOAD,), result))
