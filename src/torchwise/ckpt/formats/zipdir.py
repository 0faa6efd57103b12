"""Read a zip archive the way ``torch.load`` does (miniz), and name every trick in it.

torch's zip reader is miniz, not Python's ``zipfile``, and the two disagree on
purpose-built files: ``zipfile`` cuts names at a NUL byte, relocates a central
directory that is not where the end record says, gives the *last* of two
same-named members; miniz compares names as raw bytes, case-insensitively,
reads offsets as written, and finds the *first*. A scanner built on ``zipfile``
therefore vets a different ``data.pkl`` than torch unpickles. This module
parses the end record, the zip64 records, the central directory and the local
headers itself, with miniz's rules, and records as an :class:`ZipTrick` every
place where readers could disagree: duplicate or case-folded names, control
bytes in names, local headers that contradict the directory, overlapping
members, a directory that is not where the end record points, more than one
end record, a decoy local header at offset 0.

What miniz itself refuses (no end record, a directory outside the file,
encryption, a method other than stored or deflate) raises :class:`ZipError`
or, per member, comes back from :meth:`ZipDirectory.check_extractable`.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field

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
_SEARCH = 0xFFFF + _EOCD.size  # how far back miniz looks for the end record
_ENCRYPTED = 0x0001 | 0x0040  # traditional / strong encryption
_PATCH = 0x0020
_MASKED = 0x2000  # central directory encryption
_DESCRIPTOR = 0x0008


class ZipError(Exception):
    """miniz would refuse to open the archive; torch.load fails before unpickling."""


@dataclass(frozen=True)
class ZipTrick:
    """A construction that makes zip readers disagree: never in a file torch.save wrote."""

    message: str
    offset: int


@dataclass
class ZipMember:
    index: int
    #: the name exactly as the central directory stores it
    raw_name: bytes
    method: int
    flags: int
    crc: int
    compressed_size: int
    size: int
    header_offset: int
    external_attr: int
    #: where the member's bytes start (after its local header), or -1 when unreadable
    data_offset: int = -1
    local_name: bytes = b""
    zip64_fields: int = 0

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
    #: what miniz refuses after opening (e.g. a member whose sizes contradict each other)
    eocd_offset: int = 0

    def locate(self, name: bytes) -> ZipMember | None:
        """The member miniz finds for ``name``: ASCII case-insensitive, whole-name match.

        With duplicates miniz's binary search returns one of them (the first, in
        practice); duplicates are a trick in their own right, and every member
        is scanned, so which one does not decide a verdict.
        """
        wanted = _fold(name)
        return next((m for m in self.members if _fold(m.raw_name) == wanted), None)

    def check_extractable(self, member: ZipMember) -> str | None:
        """Why miniz would refuse to extract ``member``, or None."""
        if member.flags & (_ENCRYPTED | _PATCH):
            return f"{member.name} is marked encrypted (miniz refuses it)"
        if member.method not in (0, 8) and member.compressed_size:
            return f"{member.name} uses compression method {member.method} (miniz reads 0 and 8)"
        if member.data_offset < 0:
            return f"{member.name}: its local header is missing or broken"
        return None


def _fold(name: bytes) -> bytes:
    return name.lower() if name.isascii() else bytes(c + 32 if 65 <= c <= 90 else c for c in name)


def read_directory(raw: ByteStream, size: int) -> ZipDirectory:
    """Parse ``raw`` (``size`` bytes) as miniz does; raises :class:`ZipError` where miniz fails."""
    if size < _EOCD.size:
        raise ZipError("too short to be a zip archive")
    tail_start, tail = _find_eocd(raw, size)
    if tail_start < 0:
        raise ZipError("no end-of-central-directory record (truncated download?)")
    at = tail_start
    (_, disk, cd_disk, on_disk, total, cd_size, cd_offset, comment_len) = _EOCD.unpack_from(tail)
    tricks: list[ZipTrick] = []
    zip64_at = -1
    if at >= _ZIP64_LOCATOR.size + _ZIP64_EOCD.size:
        raw.seek(at - _ZIP64_LOCATOR.size)
        locator = raw.read(_ZIP64_LOCATOR.size) or b""
        if locator[:4] == ZIP64_LOCATOR_SIG:
            _, _, zip64_at, n_disks = _ZIP64_LOCATOR.unpack(locator)
            if zip64_at > size - _ZIP64_EOCD.size:
                raise ZipError("the zip64 locator points outside the file")
            raw.seek(zip64_at)
            record = raw.read(_ZIP64_EOCD.size) or b""
            if record[:4] == ZIP64_EOCD_SIG:
                (_, rec_size, _, _, disk, cd_disk, on_disk, total, cd_size, cd_offset) = (
                    _ZIP64_EOCD.unpack(record)
                )
                if rec_size < _ZIP64_EOCD.size - 12:
                    raise ZipError("the zip64 end record is too short")
                if n_disks != 1:
                    raise ZipError("a multi-disk zip64 archive")
            else:
                zip64_at = -1
    if total != on_disk or (disk | cd_disk and (disk, cd_disk) != (1, 1)):
        raise ZipError("a multi-disk archive (miniz reads single-disk archives only)")
    if cd_size < total * _CENTRAL.size or cd_offset + cd_size > size:
        raise ZipError("the central directory lies outside the file (truncated?)")
    _check_end_region(tail, 0, comment_len, tricks, tail_start)
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
    members = _parse_central(central, total, cd_offset, size, disk)
    consumed = sum(_CENTRAL.size + len(m.raw_name) for m in members)
    if members and consumed < cd_size and _looks_like_more_entries(central, members):
        tricks.append(
            ZipTrick(
                f"the end record counts {total} entries but the central directory holds more: "
                "zipfile lists them, torch's miniz does not",
                cd_offset,
            )
        )
    directory = ZipDirectory(members, tricks, at)
    _read_local_headers(raw, directory, size)
    _find_tricks(directory)
    return directory


def _find_eocd(raw: ByteStream, size: int) -> tuple[int, bytes]:
    """miniz's search: the last end-record signature with a whole record after it, at most
    64 KiB + 22 bytes from the end. Returns (offset, the bytes from it to the end of the file),
    or (-1, b""). The last 22 bytes are tried first (a file without a comment), so reading a
    checkpoint's directory touches no tensor data."""
    raw.seek(size - _EOCD.size)
    last = raw.read(_EOCD.size) or b""
    if last[:4] == EOCD_SIG:
        return size - _EOCD.size, last
    start, window = size, b""
    while start > 0 and size - start < _SEARCH:
        begin = max(0, start - 4096, size - _SEARCH)
        raw.seek(begin)
        window = (raw.read(start - begin) or b"") + window
        start = begin
        end = len(window)
        while (pos := window.rfind(EOCD_SIG, 0, end)) >= 0:
            if len(window) - pos >= _EOCD.size:
                return start + pos, window[pos:]
            end = pos + 3  # a signature overlapping this one's first bytes is still found
    return -1, b""


def _check_end_region(
    tail: bytes, eocd: int, comment_len: int, tricks: list[ZipTrick], base: int
) -> None:
    after = tail[eocd + _EOCD.size :]
    if any(sig in after for sig in (EOCD_SIG, ZIP64_EOCD_SIG, ZIP64_LOCATOR_SIG)):
        tricks.append(
            ZipTrick(
                "a second end-of-directory signature after the end record: readers that search "
                "differently open a different directory",
                base + eocd,
            )
        )
    if len(after) != comment_len:
        tricks.append(
            ZipTrick(
                f"{len(after)} bytes follow the end record where its comment length says "
                f"{comment_len}: zipfile and miniz accept different end records",
                base + eocd,
            )
        )


def _parse_central(
    central: bytes, total: int, cd_offset: int, size: int, disk: int
) -> list[ZipMember]:
    members: list[ZipMember] = []
    pos = 0
    for index in range(total):
        if len(central) - pos < _CENTRAL.size or central[pos : pos + 4] != CENTRAL_SIG:
            raise ZipError(f"central directory entry {index} is broken")
        (_, _, _, flags, method, _, _, crc, csize, usize, name_len, extra_len, comment_len,
         disk_start, _, external, offset) = _CENTRAL.unpack_from(central, pos)  # fmt: skip
        end = pos + _CENTRAL.size + name_len + extra_len + comment_len
        if end > len(central):
            raise ZipError(f"central directory entry {index} runs past the directory")
        name = central[pos + _CENTRAL.size : pos + _CENTRAL.size + name_len]
        extra = central[pos + _CENTRAL.size + name_len : pos + _CENTRAL.size + name_len + extra_len]
        member = ZipMember(index, name, method, flags, crc, csize, usize, offset, external)
        _apply_zip64(member, extra)
        sized = member.compressed_size != _U32_MAX and member.size != _U32_MAX
        if sized and (
            (method == 0 and member.size != member.compressed_size)
            or (member.size and not member.compressed_size)
        ):
            raise ZipError(f"{member.name}: its sizes contradict each other")
        if disk_start == 0xFFFF or disk_start not in (disk, 1):
            raise ZipError(f"{member.name}: starts on another disk")
        if member.header_offset + _LOCAL.size + member.compressed_size > size:
            raise ZipError(f"{member.name}: its data lies outside the file (truncated?)")
        if flags & _MASKED:
            raise ZipError("the central directory is encrypted")
        members.append(member)
        pos = end
    return members


def _apply_zip64(member: ZipMember, extra: bytes) -> None:
    """miniz reads the first zip64 field, for the sizes and offset that are 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + length]
        if len(body) < length:
            raise ZipError(f"{member.name}: a truncated extra field")
        if tag == 1:
            member.zip64_fields += 1
            if member.zip64_fields == 1:
                _zip64_values(member, body)
        pos += 4 + length


def _zip64_values(member: ZipMember, body: bytes) -> None:
    at = 0
    for attr in ("size", "compressed_size", "header_offset"):
        if getattr(member, attr) == _U32_MAX:
            if at + 8 > len(body):
                raise ZipError(f"{member.name}: a zip64 field too short for its sizes")
            setattr(member, attr, struct.unpack_from("<Q", body, at)[0])
            at += 8


def _looks_like_more_entries(central: bytes, members: list[ZipMember]) -> bool:
    # The first unread byte after the counted entries starts another entry.
    pos = 0
    for _ in members:
        (name_len, extra_len, comment_len) = struct.unpack_from("<HHH", central, pos + 28)
        pos += _CENTRAL.size + name_len + extra_len + comment_len
    return central[pos : pos + 4] == CENTRAL_SIG


def _read_local_headers(raw: ByteStream, directory: ZipDirectory, size: int) -> None:
    for member in directory.members:
        raw.seek(member.header_offset)
        head = raw.read(_LOCAL.size) or b""
        if len(head) < _LOCAL.size or head[:4] != LOCAL_SIG:
            continue  # data_offset stays -1: miniz refuses to extract it
        (_, _, lflags, lmethod, _, _, lcrc, lcsize, lusize, name_len, extra_len) = _LOCAL.unpack(
            head
        )
        member.local_name = raw.read(name_len) or b""
        member.data_offset = member.header_offset + _LOCAL.size + name_len + extra_len
        if member.data_offset + member.compressed_size > size:
            member.data_offset = -1
            continue
        where = member.header_offset
        if member.local_name != member.raw_name:
            directory.tricks.append(
                ZipTrick(
                    f"{member.name}: its local header names it {_show(member.local_name)}; "
                    "streaming unzippers read that name, torch reads the directory's",
                    where,
                )
            )
        if lmethod != member.method or (lflags ^ member.flags) & (_ENCRYPTED | _DESCRIPTOR):
            directory.tricks.append(
                ZipTrick(
                    f"{member.name}: its local header says method {lmethod}, flags {lflags:#x}; "
                    f"the directory says method {member.method}, flags {member.flags:#x}",
                    where,
                )
            )
        declared = (member.compressed_size, member.size, member.crc)
        if not member.flags & _DESCRIPTOR and _U32_MAX not in (lcsize, lusize):  # noqa: SIM102
            if (lcsize, lusize, lcrc) != declared:
                directory.tricks.append(
                    ZipTrick(
                        f"{member.name}: its local header gives sizes {lcsize}/{lusize}, the "
                        f"directory {member.compressed_size}/{member.size}",
                        where,
                    )
                )


def _show(name: bytes) -> str:
    return repr(name.decode("utf-8", "backslashreplace"))


def _find_tricks(directory: ZipDirectory) -> None:
    members, tricks = directory.members, directory.tricks
    seen: dict[bytes, ZipMember] = {}
    for m in members:
        if any(c < 0x20 or c == 0x7F for c in m.raw_name):
            tricks.append(
                ZipTrick(
                    f"member name {_show(m.raw_name)} holds control bytes: zipfile cuts a name "
                    "at NUL, torch's miniz compares every byte",
                    m.header_offset,
                )
            )
        key = _fold(m.raw_name)
        if key in seen:
            same = seen[key].raw_name == m.raw_name
            tricks.append(
                ZipTrick(
                    f"two members named {_show(m.raw_name)}"
                    + ("" if same else f" and {_show(seen[key].raw_name)} (miniz ignores case)")
                    + ": torch's miniz reads one, zipfile the other",
                    m.header_offset,
                )
            )
        seen.setdefault(key, m)
        if m.zip64_fields > 1:
            tricks.append(
                ZipTrick(f"{m.name}: {m.zip64_fields} zip64 size fields", m.header_offset)
            )
        if m.external_attr & 0x10 and not m.raw_name.endswith(b"/") and m.size:
            tricks.append(
                ZipTrick(
                    f"{m.name}: marked a directory but holds {m.size} bytes (miniz extracts "
                    "nothing and torch would read uninitialised memory)",
                    m.header_offset,
                )
            )
    spans = sorted(
        ((m.header_offset, m.data_offset + m.compressed_size, m) for m in members
         if m.data_offset >= 0),
        key=lambda span: (span[0], span[1]),
    )  # fmt: skip
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            tricks.append(
                ZipTrick(
                    f"members {first.name} and {second.name} overlap (a zip-bomb construction)",
                    start,
                )
            )
    if members and not any(m.header_offset == 0 for m in members):
        tricks.append(
            ZipTrick(
                "the local header at byte 0 is not in the central directory: a decoy that "
                "streaming readers see and torch does not",
                0,
            )
        )
