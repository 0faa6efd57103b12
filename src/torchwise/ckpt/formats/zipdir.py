"""Read a zip archive the way torch's reader (miniz 3.0.2) does, and name every trick in it.

torch's zip reader is miniz, not Python's ``zipfile``, and the two disagree on
purpose-built files: ``zipfile`` cuts names at a NUL byte, relocates a central
directory that is not where the end record says, gives the *last* of two
same-named members; miniz compares names as raw bytes, case-insensitively,
reads offsets as written, and finds one by binary search. A scanner built on
``zipfile`` therefore vets a different ``data.pkl`` than torch unpickles.

This module follows ``mz_zip_reader_init`` step by step (``miniz_zip.c``):

1. the end record is the *last* ``PK\\x05\\x06`` with 22 bytes after it, searched
   backwards in 4 KiB chunks until a chunk starts 64 KiB + 22 bytes or more
   before the end (so up to about 68 KiB back, not 64), and failing outright when a
   step back would go below byte 0 (an unsigned subtraction in miniz wraps there);
2. a zip64 locator right before it counts only when the zip64 end record it
   points at carries its signature;
3. the archive is refused for exactly what miniz checks while indexing the
   central directory (entry counts, disks, each entry's signature and lengths,
   the 32-bit sizes and offset when none of them is 0xFFFFFFFF, masked
   directories) and for nothing else: a field torch never reads (a broken
   extra field on an entry without zip64 values, a local header of a member it
   never extracts) never makes the archive unreadable;
4. a member's zip64 values are read when it is looked at
   (``mz_zip_file_stat_internal``), and a broken one fails that member only;
5. extracting reads the local header for its signature and two lengths only.

Where readers could disagree (duplicate or case-folded names, control bytes in
names, local headers that contradict the directory, overlapping members, a
relocated directory, more than one end record, a decoy local header at byte 0)
is recorded as a :class:`ZipTrick`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from torchwise.ckpt.formats.ziptricks import (
    ZipTrick,
    check_end_region,
    compare_local,
    find_tricks,
    fold,
)
from torchwise.ckpt.picklevm.source import ByteStream

EOCD_SIG = b"PK\x05\x06"
ZIP64_EOCD_SIG = b"PK\x06\x06"
ZIP64_LOCATOR_SIG = b"PK\x06\x07"
CENTRAL_SIG = b"PK\x01\x02"
LOCAL_SIG = b"PK\x03\x04"
_EOCD = struct.Struct("<4sHHHHIIH")  # 22 bytes
_ZIP64_LOCATOR = struct.Struct("<4sIQI")  # 20 bytes
_ZIP64_EOCD = struct.Struct("<4sQHHIIQQQQ")  # 56 bytes
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")  # 46 bytes
_LOCAL = struct.Struct("<4sHHHHHIIIHH")  # 30 bytes
_U32_MAX = 0xFFFFFFFF
_CHUNK = 4096  # miniz's search buffer
_WINDOW = 0xFFFF + _EOCD.size  # miniz gives up once a chunk starts this far back
_ENCRYPTED = 0x0001 | 0x0040  # traditional / strong encryption
_PATCH = 0x0020
_MASKED = 0x2000  # central directory encryption
_DESCRIPTOR = 0x0008


class ZipError(Exception):
    """miniz would refuse to open the archive; torch.load fails before unpickling."""


@dataclass
class ZipMember:
    index: int
    #: the name exactly as the central directory stores it
    raw_name: bytes
    method: int
    flags: int
    crc: int
    #: sizes and offset after miniz's zip64 step (the 32-bit fields when it fails)
    compressed_size: int
    size: int
    header_offset: int
    external_attr: int
    #: where the member's bytes start (after its local header), or -1 when unreadable
    data_offset: int = -1
    local_name: bytes = b""
    zip64_fields: int = 0
    #: why miniz cannot stat or extract this member (its zip64 field, its local header)
    error: str | None = None

    @property
    def name(self) -> str:
        """The name for messages: raw bytes decoded as UTF-8, odd bytes escaped."""
        return self.raw_name.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")

    @property
    def is_directory(self) -> bool:
        # miniz: a trailing slash, or the DOS directory attribute.
        return self.raw_name.endswith(b"/") or bool(self.external_attr & 0x10)


@dataclass
class ZipDirectory:
    members: list[ZipMember]
    tricks: list[ZipTrick] = field(default_factory=list)
    eocd_offset: int = 0

    def locate(self, name: bytes) -> ZipMember | None:
        """The member miniz finds for ``name`` (a C string: it ends at its first NUL).

        ``mz_zip_reader_locate_file`` compares ASCII case-insensitively, whole names.
        With duplicates miniz's binary search returns one of them; duplicates are a
        trick in their own right, and every member is scanned, so which one does not
        decide a verdict.
        """
        wanted = fold(name.split(b"\0", 1)[0])
        return next((m for m in self.members if fold(m.raw_name) == wanted), None)

    @staticmethod
    def check_extractable(member: ZipMember) -> str | None:
        """Why ``mz_zip_reader_extract_to_mem`` would fail on ``member``, or None."""
        if member.error is not None:
            return f"{member.name}: {member.error}"
        if member.is_directory or not member.compressed_size:
            return None  # miniz returns success and writes nothing
        if member.flags & (_ENCRYPTED | _PATCH):
            return f"{member.name} is marked encrypted (miniz refuses it)"
        if member.method not in (0, 8):
            return f"{member.name} uses compression method {member.method} (miniz reads 0 and 8)"
        if member.data_offset < 0:
            return f"{member.name}: its local header is missing or broken"
        return None


def read_directory(raw: ByteStream, size: int) -> ZipDirectory:
    """Parse ``raw`` (``size`` bytes) as miniz does; raises :class:`ZipError` where miniz fails."""
    if size < _EOCD.size:
        raise ZipError("too short to be a zip archive")
    at = find_eocd(raw, size)
    if at < 0:
        raise ZipError("no end-of-central-directory record")
    raw.seek(at)
    tail = raw.read(size - at) or b""
    (_, disk, cd_disk, on_disk, total, cd_size, cd_offset, comment_len) = _EOCD.unpack_from(tail)
    zip64_at = -1
    if at >= _ZIP64_LOCATOR.size + _ZIP64_EOCD.size:
        raw.seek(at - _ZIP64_LOCATOR.size)
        locator = raw.read(_ZIP64_LOCATOR.size) or b""
        if locator[:4] == ZIP64_LOCATOR_SIG:
            _, _, record_at, n_disks = _ZIP64_LOCATOR.unpack(locator)
            if record_at > size - _ZIP64_EOCD.size:
                raise ZipError("the zip64 locator points outside the file")
            raw.seek(record_at)
            record = raw.read(_ZIP64_EOCD.size) or b""
            if len(record) == _ZIP64_EOCD.size and record[:4] == ZIP64_EOCD_SIG:
                zip64_at = record_at
                (_, rec_size, _, _, disk, cd_disk, on_disk, total, cd_size, cd_offset) = (
                    _ZIP64_EOCD.unpack(record)
                )
                if rec_size < _ZIP64_EOCD.size - 12:
                    raise ZipError("the zip64 end record is too short")
                if n_disks != 1:
                    raise ZipError("a multi-disk zip64 archive")
                if max(total, on_disk, cd_size) > _U32_MAX:
                    raise ZipError("more entries or a larger directory than miniz reads")
    if total != on_disk or (disk | cd_disk and (disk, cd_disk) != (1, 1)):
        raise ZipError("a multi-disk archive (miniz reads single-disk archives only)")
    if cd_size < total * _CENTRAL.size or cd_offset + cd_size > size:
        raise ZipError("the central directory lies outside the file (truncated?)")
    tricks: list[ZipTrick] = []
    check_end_region(tail, comment_len, tricks, at)
    directory_end = zip64_at if zip64_at >= 0 else at
    if cd_offset + cd_size != directory_end:
        # Python's zipfile relocates every offset by the difference; miniz does not.
        tricks.append(
            ZipTrick(
                f"the central directory ends at byte {cd_offset + cd_size}, not where the end "
                f"record sits ({directory_end}): zipfile relocates it, torch's miniz does not",
                at,
            )
        )
    raw.seek(cd_offset)
    central = raw.read(cd_size) or b""
    if len(central) != cd_size:
        raise ZipError("the central directory cannot be read (truncated?)")
    members = _index_central(raw, central, total, cd_offset, size, disk)
    consumed = sum(_entry_length(central, m) for m in _offsets(central, len(members)))
    if members and consumed < cd_size and central[consumed : consumed + 4] == CENTRAL_SIG:
        tricks.append(
            ZipTrick(
                f"the end record counts {total} entries but the central directory holds more: "
                "zipfile lists them, torch's miniz does not",
                cd_offset,
            )
        )
    directory = ZipDirectory(members, tricks, at)
    _read_local_headers(raw, directory, size)
    find_tricks(directory)
    return directory


def find_eocd(raw: ByteStream, size: int) -> int:
    """``mz_zip_reader_locate_header_sig``: the offset of the end record, or -1.

    The last 22 bytes are tried first: a file without a comment ends with its end
    record, and then the answer is the same as miniz's without reading further back
    (reading a checkpoint's directory touches no tensor data).
    """
    if size < _EOCD.size:
        return -1
    raw.seek(size - _EOCD.size)
    if (raw.read(4) or b"") == EOCD_SIG:
        return size - _EOCD.size
    cur = max(size - _CHUNK, 0)
    while True:
        n = min(_CHUNK, size - cur)
        raw.seek(cur)
        buf = raw.read(n) or b""
        if len(buf) != n:
            return -1
        i = n - 4
        while i >= 0:
            i = buf.rfind(EOCD_SIG, 0, i + 4)
            if i < 0:
                break
            if size - (cur + i) >= _EOCD.size:
                return cur + i
            i -= 1
        if not cur or size - cur >= _WINDOW:
            return -1
        if cur < _CHUNK - 3:
            # MZ_MAX(cur - (sizeof(buf) - 3), 0) subtracts a size_t: the difference wraps
            # around instead of going negative, the next read is at a negative offset and
            # fails (a small file whose end record is not in its last 4 KiB does not open)
            return -1
        cur -= _CHUNK - 3


def _offsets(central: bytes, count: int) -> list[int]:
    out, pos = [], 0
    for _ in range(count):
        out.append(pos)
        pos += _entry_length(central, pos)
    return out


def _entry_length(central: bytes, pos: int) -> int:
    name_len, extra_len, comment_len = struct.unpack_from("<HHH", central, pos + 28)
    return int(_CENTRAL.size + name_len + extra_len + comment_len)


def _index_central(
    raw: ByteStream, central: bytes, total: int, cd_offset: int, size: int, disk: int
) -> list[ZipMember]:
    """The loop of ``mz_zip_reader_read_central_dir`` that indexes every entry."""
    members: list[ZipMember] = []
    pos, n, extended_info = 0, len(central), False
    for index in range(total):
        if n < _CENTRAL.size or central[pos : pos + 4] != CENTRAL_SIG:
            raise ZipError(f"central directory entry {index} is broken")
        (_, _, _, flags, method, _, _, crc, csize, usize, name_len, extra_len, comment_len,
         disk_start, _, external, offset) = _CENTRAL.unpack_from(central, pos)  # fmt: skip
        if not extended_info and extra_len and _U32_MAX in (csize, usize, offset):
            extended_info = _has_zip64_field(raw, central, pos, n, cd_offset, name_len, extra_len)
        if _U32_MAX not in (csize, usize) and (
            (method == 0 and usize != csize) or (usize and not csize)
        ):
            raise ZipError(f"entry {index}: its sizes contradict each other")
        if disk_start == 0xFFFF or disk_start not in (disk, 1):
            raise ZipError(f"entry {index} starts on another disk")
        if csize != _U32_MAX and offset + _LOCAL.size + csize > size:
            raise ZipError(f"entry {index}: its data lies outside the file (truncated?)")
        if flags & _MASKED:
            raise ZipError("the central directory is encrypted")
        length = _CENTRAL.size + name_len + extra_len + comment_len
        if length > n:
            raise ZipError(f"central directory entry {index} runs past the directory")
        name = central[pos + _CENTRAL.size : pos + _CENTRAL.size + name_len]
        extra = central[pos + _CENTRAL.size + name_len : pos + _CENTRAL.size + name_len + extra_len]
        member = ZipMember(index, name, method, flags, crc, csize, usize, offset, external)
        _stat_zip64(member, extra)
        members.append(member)
        n -= length
        pos += length
    return members


def _has_zip64_field(
    raw: ByteStream,
    central: bytes,
    pos: int,
    remaining: int,
    cd_offset: int,
    name_len: int,
    extra_len: int,
) -> bool:
    """miniz's one-time search for a zip64 field while indexing (its checks raise)."""
    if _CENTRAL.size + name_len + extra_len > remaining:
        # miniz reads these bytes from the file at the *directory's* offset (sic)
        raw.seek(cd_offset + _CENTRAL.size + name_len)
        extra = raw.read(extra_len) or b""
        if len(extra) != extra_len:
            raise ZipError("the central directory cannot be read (truncated?)")
    else:
        start = pos + _CENTRAL.size + name_len
        extra = central[start : start + extra_len]
    at = 0
    while at < len(extra):
        if len(extra) - at < 4:
            raise ZipError("a truncated extra field")
        tag, length = struct.unpack_from("<HH", extra, at)
        if length + 4 > len(extra) - at:
            raise ZipError("a truncated extra field")
        if tag == 1:
            return True
        at += 4 + length
    return False


def _stat_zip64(member: ZipMember, extra: bytes) -> None:
    """``mz_zip_file_stat_internal``: the first zip64 field fills the 0xFFFFFFFF values.

    Only when one of them is 0xFFFFFFFF; a broken field fails this member, not the archive.
    """
    member.zip64_fields = _count_zip64_fields(extra)
    if _U32_MAX not in (member.compressed_size, member.size, member.header_offset):
        return
    at = 0
    while at < len(extra):
        if len(extra) - at < 4:
            member.error = "a truncated extra field (miniz cannot stat it)"
            return
        tag, length = struct.unpack_from("<HH", extra, at)
        if length + 4 > len(extra) - at:
            member.error = "a truncated extra field (miniz cannot stat it)"
            return
        if tag == 1:
            body, used = extra[at + 4 : at + 4 + length], 0
            for attr in ("size", "compressed_size", "header_offset"):
                if getattr(member, attr) == _U32_MAX:
                    if used + 8 > len(body):
                        member.error = "a zip64 field too short for its values"
                        return
                    setattr(member, attr, struct.unpack_from("<Q", body, used)[0])
                    used += 8
            return
        at += 4 + length


def _count_zip64_fields(extra: bytes) -> int:
    count, at = 0, 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, at)
        count += tag == 1
        at += 4 + length
    return count


def _read_local_headers(raw: ByteStream, directory: ZipDirectory, size: int) -> None:
    """Where each member's data starts, as extraction finds it (signature and two lengths)."""
    for member in directory.members:
        if member.error is not None:
            continue
        raw.seek(member.header_offset)
        head = raw.read(_LOCAL.size) or b""
        if len(head) < _LOCAL.size or head[:4] != LOCAL_SIG:
            continue  # data_offset stays -1: miniz refuses to extract it
        (_, _, lflags, lmethod, _, _, lcrc, lcsize, lusize, name_len, extra_len) = _LOCAL.unpack(
            head
        )
        member.local_name = raw.read(name_len) or b""
        data_offset = member.header_offset + _LOCAL.size + name_len + extra_len
        if data_offset + member.compressed_size > size:
            continue
        member.data_offset = data_offset
        compare_local(directory, member, lflags, lmethod, (lcsize, lusize, lcrc))
