"""Build hostile files byte by byte: zip archives with every header field under control,
pre-1.0 tar checkpoints, and pickles no Python object pickles to.

Written from the formats' specifications (PKWARE's APPNOTE, torch.load's
``legacy_load``), not from any other tool; shared by the tests and ``bench/``.
"""

from __future__ import annotations

import io
import pickle
import struct
import tarfile
import zlib
from dataclasses import dataclass

# --- pickles ---------------------------------------------------------------------------

PROTO2, PROTO4 = b"\x80\x02", b"\x80\x04"
MARK, TUPLE, REDUCE, STOP, POP = b"(", b"t", b"R", b".", b"0"
TUPLE1, STACK_GLOBAL, MEMOIZE, EMPTY_DICT, SETITEM = b"\x85", b"\x93", b"\x94", b"}", b"s"


def u(text: str) -> bytes:
    """BINUNICODE."""
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def su(text: str) -> bytes:
    """SHORT_BINUNICODE (protocol 4)."""
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data


def glob(module: str, name: str) -> bytes:
    return f"c{module}\n{name}\n".encode()


def call(func: bytes, *args: bytes) -> bytes:
    return func + MARK + b"".join(args) + TUPLE + REDUCE


def touch(marker: str) -> bytes:
    """Opcodes that call ``open(marker, 'w')``: a real payload whose only effect is a file.

    Protocol-0 opcodes only (GLOBAL, MARK, UNICODE, TUPLE, REDUCE), so it can be
    embedded in a pickle of any protocol; it leaves the file object on the stack.
    """
    return glob("builtins", "open") + MARK + f"V{marker}\nVw\n".encode() + TUPLE + REDUCE


def payload_pickle(marker: str, protocol: bytes = PROTO2) -> bytes:
    return protocol + touch(marker) + STOP


def benign_pickle() -> bytes:
    return pickle.dumps({"w": 1}, protocol=2)


# --- zip ---------------------------------------------------------------------------------


@dataclass
class Entry:
    name: bytes
    data: bytes
    method: int = 0
    flags: int = 0
    local_name: bytes | None = None
    local_method: int | None = None
    crc: int | None = None
    #: central (compressed, uncompressed) sizes, when they should lie
    sizes: tuple[int, int] | None = None
    local_sizes: tuple[int, int] | None = None
    #: the stored bytes, raw, when they should not be ``data`` compressed by ``method``
    payload: bytes | None = None
    extra: bytes = b""
    descriptor: bool = False
    zip64: bool = False
    external_attr: int = 0


def _compress(data: bytes, method: int) -> bytes:
    if method == 8:
        engine = zlib.compressobj(9, zlib.DEFLATED, -15)
        return engine.compress(data) + engine.flush()
    if method == 12:
        import bz2

        return bz2.compress(data)
    if method == 14:
        import lzma

        raw = lzma.compress(data, lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1}])
        props = lzma._encode_filter_properties({"id": lzma.FILTER_LZMA1})  # type: ignore[attr-defined]
        return struct.pack("<BBH", 9, 4, len(props)) + props + raw
    return data


def build_zip(
    entries: list[Entry],
    *,
    order: list[int] | None = None,
    prefix: bytes = b"",
    comment: bytes = b"",
    tail: bytes = b"",
    zip64_eocd: bool = False,
    count: int | None = None,
    cd_shift: int = 0,
) -> bytes:
    """A zip archive. ``order`` lists entries in the central directory (default: all, in
    order); ``count`` overrides the end record's entry count; ``cd_shift`` misstates the
    central directory's offset."""
    out = bytearray(prefix)
    offsets, metas = [], []
    for e in entries:
        stored = e.payload if e.payload is not None else _compress(e.data, e.method)
        crc = zlib.crc32(e.data) if e.crc is None else e.crc
        csize, usize = e.sizes or (len(stored), len(e.data))
        flags = e.flags | (0x8 if e.descriptor else 0)
        lcrc, (lcsize, lusize) = crc, e.local_sizes or (csize, usize)
        if e.descriptor:
            lcrc, lcsize, lusize = 0, 0, 0
        name = e.name if e.local_name is None else e.local_name
        method = e.method if e.local_method is None else e.local_method
        extra = b""
        if e.zip64:
            extra = struct.pack("<HHQQ", 1, 16, lusize, lcsize)
            lcsize = lusize = 0xFFFFFFFF
        offsets.append(len(out))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if e.zip64 else 20, flags, method,
                           0, 0x21, lcrc, lcsize, lusize, len(name), len(extra))  # fmt: skip
        out += name + extra + stored
        if e.descriptor:
            out += struct.pack("<IIII", 0x08074B50, crc, csize, usize)
        metas.append((e, crc, csize, usize, flags))
    cd_start = len(out)
    listed = order if order is not None else list(range(len(entries)))
    for i in listed:
        e, crc, csize, usize, flags = metas[i]
        extra, sizes, offset = e.extra, (csize, usize), offsets[i]
        if e.zip64:
            extra = struct.pack("<HHQQQ", 1, 24, usize, csize, offsets[i]) + extra
            sizes, offset = (0xFFFFFFFF, 0xFFFFFFFF), 0xFFFFFFFF
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45 if e.zip64 else 20, flags,
                           e.method, 0, 0x21, crc, sizes[0], sizes[1], len(e.name), len(extra),
                           0, 0, 0, e.external_attr, offset)  # fmt: skip
        out += e.name + extra
    cd_size = len(out) - cd_start
    n = len(listed) if count is None else count
    if zip64_eocd:
        at = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_start)
        out += struct.pack("<IIQI", 0x07064B50, 0, at, 1)
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                           0xFFFFFFFF, len(comment))  # fmt: skip
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, cd_size, cd_start + cd_shift,
                           len(comment))  # fmt: skip
    return bytes(out + comment + tail)


def torch_entries(data_pkl: bytes, archive: bytes = b"archive", *extra: Entry) -> list[Entry]:
    """The members torch.load needs: data.pkl, byteorder, version (and ``extra`` before it)."""
    return [
        Entry(archive + b"/data.pkl", data_pkl),
        Entry(archive + b"/byteorder", b"little"),
        *extra,
        Entry(archive + b"/version", b"3\n"),
    ]


# --- the pre-1.0 tar format --------------------------------------------------------------


def _tar_args(*parts: bytes) -> bytes:
    return PROTO2 + MARK + b"".join(parts) + TUPLE + STOP


def _int(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def tar_checkpoint(
    obj_pickle: bytes,
    storages: list[tuple[int, str, str, bytes, int]],
    tensors: list[tuple[int, int, tuple[int, ...], tuple[int, ...], int]],
    *,
    members: dict[str, bytes] | None = None,
    first: tuple[str, bytes] | None = None,
) -> bytes:
    """A tar checkpoint as torch.load's ``legacy_load`` reads it.

    ``storages``: (key, location, storage class name, raw bytes, element size);
    ``tensors``: (key, storage key, sizes, strides, storage offset). ``members``
    replaces a member's bytes; ``first`` adds a member before the three.
    """
    s = io.BytesIO()
    s.write(pickle.dumps(len(storages), 2))
    for key, location, storage_class, raw, element in storages:
        s.write(_tar_args(_int(key), u(location), glob("torch", storage_class)))
        s.write(struct.pack("<q", len(raw) // element) + raw)
    s.write(pickle.dumps([], 2))
    t = io.BytesIO()
    t.write(pickle.dumps(len(tensors), 2))
    for key, storage, sizes, strides, offset in tensors:
        t.write(_tar_args(_int(key), _int(storage), glob("torch", "FloatTensor")))
        t.write(struct.pack("<i", len(sizes)) + b"\0" * 4)
        t.write(struct.pack(f"<{len(sizes)}q", *sizes) + struct.pack(f"<{len(strides)}q", *strides))
        t.write(struct.pack("<q", offset))
    parts = {"storages": s.getvalue(), "tensors": t.getvalue(), "pickle": obj_pickle}
    parts.update(members or {})
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ([first] if first else []) + list(parts.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def simple_tar_checkpoint() -> bytes:
    """{"w": a 2x3 float tensor 0..5}, in the tar format."""
    raw = struct.pack("<6f", *range(6))
    obj = PROTO2 + EMPTY_DICT + u("w") + u("2") + b"Q" + SETITEM + STOP  # persistent id "2"
    return tar_checkpoint(obj, [(1, "cpu", "FloatStorage", raw, 4)], [(2, 1, (2, 3), (3, 1), 0)])


def build_zip_two_directories(
    entries: list[Entry], torch_sees: list[int], zipfile_sees: list[int]
) -> bytes:
    """Two central directories of one size: the end record points at the first (miniz
    reads it as written), and sits right after the second (zipfile relocates to it)."""
    full = build_zip(entries, order=torch_sees)
    first_cd = int.from_bytes(full[-6:-2], "little")
    cd_size = int.from_bytes(full[-10:-6], "little")
    torch_cd = full[first_cd : first_cd + cd_size]
    other = build_zip(entries, order=zipfile_sees)
    zipfile_cd = other[first_cd : first_cd + cd_size]
    assert len(zipfile_cd) == len(torch_cd), "the two directories must have one size"
    eocd = bytearray(full[first_cd + cd_size :])
    return full[:first_cd] + torch_cd + zipfile_cd + bytes(eocd)
