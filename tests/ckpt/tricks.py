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


def _zip_cases(p: dict[str, bytes]) -> list[tuple[Trick, bytes]]:
    """``p``: trick name -> its payload pickle."""
    benign = benign_pickle()
    rest = [Entry(b"archive/byteorder", b"little"), Entry(b"archive/version", b"3\n")]
    data = b"archive/data.pkl"

    def first(name: str, **fields: object) -> bytes:
        """A torch zip whose data.pkl (the payload) has ``fields`` changed."""
        entries = torch_entries(p[name])
        for attr, value in fields.items():
            setattr(entries[0], attr, value)
        return build_zip(entries, zip64_eocd=bool(fields.get("zip64")))

    def two(name: str, decoy: bytes = data, **kw: object) -> bytes:
        return build_zip([Entry(data, p[name]), Entry(decoy, benign), *rest], **kw)  # type: ignore[arg-type]

    two_dirs = [Entry(data, p["zip two central directories"]), Entry(data, benign), *rest]
    return [
        (Trick("zip duplicate, payload first", "torch reads the first, zipfile the last", True),
         two("zip duplicate, payload first")),
        (Trick("zip duplicate, payload second", "zipfile reads the payload", False),
         build_zip([Entry(data, benign), Entry(data, p["zip duplicate, payload second"]), *rest])),
        (Trick("zip NUL-byte decoy", "zipfile cuts data.pkl\\0X to data.pkl", True),
         two("zip NUL-byte decoy", data + b"\0X")),
        (Trick("zip name case", "miniz finds DATA.PKL for data.pkl, zipfile does not", True),
         build_zip([Entry(b"archive/DATA.PKL", p["zip name case"]), *rest])),
        (Trick("zip local name differs", "a streaming unzipper sees another name", True),
         first("zip local name differs", local_name=b"archive/readme.txt")),
        (Trick("zip local method differs", "local says deflate, the directory stored", True),
         first("zip local method differs", local_method=8)),
        (Trick("zip data descriptors", "sizes only after the data", True),
         first("zip data descriptors", descriptor=True)),
        (Trick("zip64", "zip64 sizes and end records", True), first("zip64", zip64=True)),
        (Trick("zip deflate", "a compressed data.pkl", True), first("zip deflate", method=8)),
        (Trick("zip bad CRC", "zipfile refuses the member, torch never checks", True),
         first("zip bad CRC", crc=0x12345678)),
        (Trick("zip end-record signature in comment", "zipfile finds no end record", True),
         build_zip(torch_entries(p["zip end-record signature in comment"]),
                   comment=b"PK\x05\x06xx")),
        (Trick("zip two central directories", "zipfile relocates to the benign one", True),
         build_zip_two_directories(two_dirs, torch_sees=[0, 2, 3], zipfile_sees=[1, 2, 3])),
        (Trick("zip entry count", "the end record counts 3 entries, zipfile reads 4", True),
         build_zip([Entry(data, p["zip entry count"]), *rest, Entry(data, benign)], count=3)),
        (Trick("zip overlapping members", "two entries share one local header", True),
         build_zip(torch_entries(p["zip overlapping members"]), order=[0, 1, 2, 0])),
        (Trick("zip decoy local header", "byte 0 holds a header the directory omits", True),
         build_zip([Entry(data, benign), Entry(data, p["zip decoy local header"]), *rest],
                   order=[1, 2, 3])),
        (Trick("zip trailing bytes", "bytes after the end record", True),
         build_zip(torch_entries(p["zip trailing bytes"]), tail=b"\0" * 8)),
        (Trick("zip bzip2 member", "miniz cannot read it; zipfile can", False),
         first("zip bzip2 member", method=12)),
        (Trick("zip lzma member", "miniz cannot read it; zipfile can", False),
         first("zip lzma member", method=14)),
        (Trick("zip encrypted flag", "marked encrypted, stored in the clear", False),
         first("zip encrypted flag", flags=1)),
    ]  # fmt: skip


def _call_open(marker: str) -> bytes:
    """``(V<marker>\\nVw\\nt R .``: call what is on the stack with (marker, 'w'), then STOP."""
    return b"(V" + marker.encode() + b"\nVw\ntR."


def _pickle_cases(m: dict[str, str]) -> list[tuple[Trick, bytes]]:
    def t(name: str) -> bytes:
        return touch(m[name])

    def zipped(blob: bytes) -> bytes:
        return build_zip(torch_entries(blob))

    ustar = PROTO2 + t("ustar at 257, bad checksum") + POP
    filler = (b"u" * (257 - len(ustar) - 5) + b"ustar").ljust(300, b"\0")
    ustar += b"X" + struct.pack("<I", 300) + filler + STOP
    looks = b"G" + b"\0" * 7 + b"{" + POP + t("pickle that looks like safetensors") + POP
    looks += b"N" + STOP + b" " * 80
    frame = PROTO4 + b"\x95" + struct.pack("<Q", 1 << 20)
    escapes = PROTO4 + b"S'bu\\x69ltins'\nS'open'\n\x93"
    memo = PROTO4 + su("builtins") + b"\x940" + su("open") + b"\x940h\x00h\x01\x93"
    tar_payload = {"storages": payload_pickle(m["tar checkpoint, payload in storages"])}
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
         _MAGIC + b"I01751\n." + _SYS_INFO + PROTO2 + t("legacy protocol in octal") + STOP
         + _KEYS),
        (Trick("legacy sys_info slot", "the payload in the third pickle", True),
         _MAGIC + _PROTOCOL + PROTO2 + t("legacy sys_info slot") + STOP + _EMPTY + _KEYS),
        (Trick("legacy storage-keys slot", "the payload in the fifth pickle", True),
         _MAGIC + _PROTOCOL + _SYS_INFO + _EMPTY + PROTO2 + t("legacy storage-keys slot") + STOP),
        (Trick("legacy wrong protocol", "torch stops after #2; #3 is a payload", False),
         _MAGIC + pickle.dumps(7, 2) + PROTO2 + t("legacy wrong protocol") + STOP + _EMPTY
         + _KEYS),
        (Trick("second stacked pickle", "torch.load stops after #1; a load loop runs #2", False),
         benign_pickle() + payload_pickle(m["second stacked pickle"])),
        (Trick("STRING escapes spell the module", "S'bu\\x69ltins' + STACK_GLOBAL", True),
         zipped(escapes + _call_open(m["STRING escapes spell the module"]))),
        (Trick("STRING that is not UTF-8", "torch raises; encoding='latin1' goes on", False),
         zipped(PROTO2 + b"S'\\xff'\n" + POP + t("STRING that is not UTF-8") + STOP)),
        (Trick("GLOBAL with CRLF", "the name is 'builtins\\r': the import fails", False),
         zipped(PROTO2 + b"cbuiltins\r\nopen\r\n" + _call_open(m["GLOBAL with CRLF"]))),
        (Trick("protocol switch to 2", "PROTO 4 then PROTO 2: __builtin__ is mapped", True),
         zipped(PROTO4 + PROTO2 + b"c__builtin__\nopen\n" + _call_open(m["protocol switch to 2"]))),
        (Trick("Python 2 name at protocol 3", "no mapping: __builtin__ does not import", False),
         zipped(b"\x80\x03c__builtin__\nopen\n" + _call_open(m["Python 2 name at protocol 3"]))),
        (Trick("INST", "protocol 0 INST calls the class with the marked arguments", True),
         zipped(b"(V" + m["INST"].encode() + b"\nVw\nibuiltins\nopen\n.")),
        (Trick("FLOAT with underscore", "C rejects F1_0; pickle._Unpickler reads it", False),
         zipped(PROTO2 + b"F1_0\n" + POP + t("FLOAT with underscore") + STOP)),
        (Trick("FRAME longer than the data", "C reads the frame first and fails", False),
         zipped(frame + t("FRAME longer than the data") + STOP)),
        (Trick("ustar at 257, bad checksum", "torch tries tar, fails, unpickles", True), ustar),
        (Trick("pickle that looks like safetensors", "a small length, then '{'", True), looks),
        (Trick("tar checkpoint, payload in storages", "a valid tar header: the tar route", True),
         tar_checkpoint(benign_pickle(), [], [], members=tar_payload)),
        (Trick("tar checkpoint, payload in the object", "the tar's pickle member", True),
         tar_checkpoint(payload_pickle(m["tar checkpoint, payload in the object"]), [], [])),
        (Trick("STACK_GLOBAL through the memo", "names reach STACK_GLOBAL via the memo", True),
         zipped(memo + _call_open(m["STACK_GLOBAL through the memo"]))),
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
    root.mkdir(parents=True, exist_ok=True)
    markers = {name: str(marker_for(root, _slug(name))) for name in NAMES}
    payloads = {name: payload_pickle(path) for name, path in markers.items()}
    built = _zip_cases(payloads) + _pickle_cases(markers) + [_tar_link_case(markers, root)]
    cases = [Case(_slug(trick.name), blob, trick.what) for trick, blob in built]
    return cases, {_slug(trick.name): trick for trick, _ in built}


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")
