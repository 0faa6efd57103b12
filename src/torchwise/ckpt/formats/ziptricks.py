"""Where zip readers could disagree about an archive, named as :class:`ZipTrick` records.

Never in a file torch.save or Python's zipfile wrote: duplicate or case-folded
names (miniz finds one, zipfile the last), control bytes in names (zipfile cuts
at NUL), local headers that contradict the central directory (streaming
unzippers read those), overlapping members, a member marked a directory that
holds data, several zip64 fields, bytes or another end record after the end
record, a decoy local header at byte 0.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchwise.ckpt.formats.zipdir import ZipDirectory, ZipMember

_EOCD_SIZE = 22
_U32_MAX = 0xFFFFFFFF
_ENCRYPTED = 0x0001 | 0x0040
_DESCRIPTOR = 0x0008
_END_SIGNATURES = (b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07")


@dataclass(frozen=True)
class ZipTrick:
    """A construction that makes zip readers disagree: never in a file torch.save wrote."""

    message: str
    offset: int


def fold(name: bytes) -> bytes:
    """ASCII lower case, as miniz's ``MZ_TOLOWER`` compares names."""
    return bytes(c + 32 if 65 <= c <= 90 else c for c in name)


def check_end_region(tail: bytes, comment_len: int, tricks: list[ZipTrick], base: int) -> None:
    after = tail[_EOCD_SIZE:]
    if any(sig in after for sig in _END_SIGNATURES):
        tricks.append(
            ZipTrick(
                "a second end-of-directory signature after the end record: readers that search "
                "differently open a different directory",
                base,
            )
        )
    if len(after) != comment_len:
        tricks.append(
            ZipTrick(
                f"{len(after)} bytes follow the end record where its comment length says "
                f"{comment_len}: zipfile and miniz accept different end records",
                base,
            )
        )


def compare_local(
    directory: ZipDirectory, member: ZipMember, lflags: int, lmethod: int, local: tuple[int, ...]
) -> None:
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
    if not member.flags & _DESCRIPTOR and _U32_MAX not in local[:2] and local != declared:
        directory.tricks.append(
            ZipTrick(
                f"{member.name}: its local header gives sizes {local[0]}/{local[1]}, the "
                f"directory {member.compressed_size}/{member.size}",
                where,
            )
        )


def _show(name: bytes) -> str:
    return repr(name.decode("utf-8", "backslashreplace"))


def find_tricks(directory: ZipDirectory) -> None:
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
        key = fold(m.raw_name)
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
