"""The zip route of ``torch.load``: which records it reads, in its order, with its checks.

``torch.load`` on a file whose first four bytes are ``PK\\x03\\x04``:

1. opens the archive with miniz (:mod:`torchwise.ckpt.formats.zipdir`);
2. takes the *first* directory entry's folder as the record prefix, and refuses an
   archive with any member outside it (``getAllRecords``);
3. reads ``.data/version`` or ``version`` (a number from 1 to 10);
4. dispatches to ``torch.jit.load`` when ``getAllRecords()`` lists ``constants.pkl``
   (names from a 512-byte buffer, cut at NUL, prefix stripped, compared exactly in
   Python); ``torch.jit.load`` itself finds ``constants.pkl`` (or the legacy
   ``model.json``) with miniz's case-insensitive lookup. Either way it is a
   TorchScript archive, whose code runs (``__setstate__`` at load);
5. checks ``byteorder`` (``little`` or ``big``) and ``.storage_alignment``;
6. unpickles ``data.pkl``, with ``torch.tensor`` mapped to ``torch._tensor``.

A ``.pt2`` (``torch.export.save``) has no ``data.pkl``: ``torch.export.load``
unpickles its pickled weights and constants (``weights_only=False``) and nested
``torch.save`` archives. Every member other than a storage ``data.pkl`` points
at is decoded as a pickle or opened as a nested archive, whatever its name.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import cast

from torchwise.ckpt.budgets import BudgetExceeded, Budgets, Meter
from torchwise.ckpt.formats.container import Container, PickleMember, WindowFile
from torchwise.ckpt.formats.zipdir import (
    LOCAL_SIG,
    ZipDirectory,
    ZipError,
    ZipMember,
    read_directory,
)
from torchwise.ckpt.formats.zipstream import MemberStream
from torchwise.ckpt.loaders.export_load import read_pt2_configs
from torchwise.ckpt.loaders.names import EXPORT_LOAD, JIT_LOAD, TORCH_LOAD
from torchwise.ckpt.picklevm.machine import run_pickle
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.ckpt.picklevm.values import PickleResult, Stop

MAX_NESTING = 4
#: MZ_ZIP_MAX_ARCHIVE_FILENAME_SIZE: getAllRecords() reads names into a buffer this long
_NAME_BUFFER = 512
#: the largest text record (version, byteorder) read; a real one is a few bytes
_SMALL = 1 << 16
#: a compressed nested archive stays in memory up to this size, then spills to disk
_SPOOL = 16 << 20
_MIN_VERSION, _MAX_VERSION = 1, 10
_TORCH_MODULE_MAPPING = {"torch.tensor": "torch._tensor"}
_PROTO_HEADS = {bytes([0x80, p]) for p in range(6)}


@dataclass
class ZipContext:
    raw: ByteStream
    size: int
    meter: Meter
    #: decode the start of every storage that begins like a pickle (scan), or read none (inspect)
    probe_storages: bool
    depth: int = 0
    prefix: str = ""  # "outer.pt!" for a nested archive's members
    #: where ``raw`` sits in the file ("" for the file itself, "+<offset>" chains for stored
    #: nested archives, None when it was inflated): identifies the same bytes on a revisit
    base: str | None = ""
    #: nested archive (its bytes) -> the work reading it cost; shared by every level
    visited: dict[tuple[str, int, int, int], int] = field(default_factory=dict)

    @property
    def budgets(self) -> Budgets:
        return self.meter.budgets


@dataclass
class TorchRecords:
    """The archive as PyTorchStreamReader sees it: a prefix and records under it."""

    directory: ZipDirectory
    prefix: bytes
    #: getAllRecords(): every name as a C string from a 512-byte buffer, prefix stripped
    names: list[bytes]
    #: members outside the prefix: getAllRecords() throws (torch.load's TorchScript check
    #: calls it; torch.jit.load never does)
    outside: list[str] = field(default_factory=list)

    def find(self, name: str) -> ZipMember | None:
        """hasRecord/getRecord: miniz's case-insensitive lookup of prefix + name."""
        return self.directory.locate(self.prefix + name.encode())


def read_torch_zip(container: Container, ctx: ZipContext) -> None:
    """Fill ``container`` from the zip at ``ctx.raw`` (its first 4 bytes are PK\\x03\\x04)."""
    container.format = "zip"
    try:
        directory = read_directory(ctx.raw, ctx.size)
    except ZipError as exc:
        hint = " (truncated download?)" if "end-of-central-directory" in str(exc) else ""
        container.reject(f"torch.load cannot open the zip archive: {exc}{hint}")
        return
    ctx.meter.charge_opcodes(len(directory.members), directory.eocd_offset)  # each entry costs
    for trick in directory.tricks:
        container.trick(trick.message, ctx.prefix + "zip structure", trick.offset, "zip-confusion")
    records = torch_records(container, directory)
    if records.outside:
        container.reject(
            f"member {records.outside[0]!r} is outside the folder "
            f"{records.prefix.decode(errors='replace')} (torch.load refuses it)"
        )
    consumed: set[int] = set()
    archive_format = _small_record(ctx, records.find("archive_format"))
    if archive_format is not None and archive_format.strip() == b"pt2":
        container.format = "pt2"
        container.route(EXPORT_LOAD, None)
    else:
        check_version(container, ctx, records)
        if not flag_torchscript(container, records, ctx.prefix):
            container.format = "torch-zip"
            _check_load_records(container, ctx, records)
    data = records.find("data.pkl")
    if data is not None:
        consumed.add(data.index)
        decoded = _decode_member(container, ctx, data, role="data", loaders=(TORCH_LOAD,))
        if decoded is not None:
            _mark_storages(container, ctx, records, decoded.result, consumed)
    elif container.format == "torch-zip":
        container.reject("the archive has no data.pkl (torch.load reads <prefix>/data.pkl)")
        container.format = "zip"
    if container.format == "pt2":
        read_pt2_configs(container, ctx, records)
    for member in directory.members:
        if member.index not in consumed:
            _probe(container, ctx, member, payload=container.format == "pt2")


def flag_torchscript(container: Container, records: TorchRecords, where: str) -> bool:
    """A TorchScript archive, as torch.load and torch.jit.load tell one: True when it is."""
    # torch.load's _is_torchscript_zip (getAllRecords throws when a member is outside)
    forwarded = b"constants.pkl" in records.names and not records.outside
    found = records.find("constants.pkl") or records.find("model.json")  # jit.load's lookups
    if found is None:
        if forwarded:
            container.reject(
                "torch.load hands it to torch.jit.load, whose lookup finds no constants.pkl"
            )
        return False
    container.format = "torchscript"
    loaders = (TORCH_LOAD, JIT_LOAD) if forwarded else (JIT_LOAD,)
    how = (
        "torch.load hands it to torch.jit.load (with weights_only=True too before torch 2.6: "
        "CVE-2025-32434)"
        if forwarded
        else f"torch.jit.load finds {found.name} (miniz ignores case), torch.load does not"
    )
    container.trick(
        f"a TorchScript archive: {how}, which compiles the TorchScript code in it and runs "
        "its __setstate__ methods while loading",
        where + "code/",
        0,
        "torchscript",
        loaders=loaders,
    )
    return True


def torch_records(container: Container, directory: ZipDirectory) -> TorchRecords:
    """PyTorchStreamReader's view; rejects (on ``container``) what its constructor refuses."""
    if not directory.members:
        container.reject("the archive holds no files (torch's reader refuses it)")
        return TorchRecords(directory, b"\0", [])
    first = directory.members[0].raw_name
    if b"/" not in first:
        container.reject(f"the first member {first!r} is not in a folder (torch.load refuses it)")
        return TorchRecords(directory, b"\0", [])
    prefix = first.split(b"/", 1)[0] + b"/"
    names: list[bytes] = []
    outside: list[str] = []
    for member in directory.members:
        c_name = member.raw_name[: _NAME_BUFFER - 1].split(b"\0", 1)[0]
        if not c_name.startswith(prefix):
            outside.append(member.name)
        names.append(c_name[len(prefix) :])
    container.metadata["record_prefix"] = prefix.decode("utf-8", "replace")
    return TorchRecords(directory, prefix, names, outside)


def _small_record(ctx: ZipContext, member: ZipMember | None) -> bytes | None:
    """The bytes of a small text record, or None when miniz could not extract it."""
    if member is None or ZipDirectory.check_extractable(member) or member.size > _SMALL:
        return None
    try:
        stream = MemberStream(ctx.raw, member, _SMALL, ctx.meter)
        data = stream.read()
    except (ZipError, BudgetExceeded):
        return None
    return None if stream.extraction_error() else data


def check_version(container: Container, ctx: ZipContext, records: TorchRecords) -> None:
    """The reader's constructor: ``.data/version`` or ``version``, ``std::stoull``, 1 to 10."""
    version_member = records.find(".data/version") or records.find("version")
    if version_member is None:
        container.reject("the archive has no version record (torch's reader refuses it)")
        return
    version = _small_record(ctx, version_member)
    number = _stoull(version or b"")
    if number is None or not _MIN_VERSION <= number <= _MAX_VERSION:
        container.reject(f"version record {version!r}: torch's reader takes versions 1 to 10")


def _check_load_records(container: Container, ctx: ZipContext, records: TorchRecords) -> None:
    """``torch.serialization._load``: the byte order and storage alignment records."""
    if records.find("byteorder") is not None:
        value = _small_record(ctx, records.find("byteorder"))
        if value not in (b"little", b"big"):
            container.reject(f"byteorder record {value!r} (torch.load wants little or big)")
        else:
            container.metadata["byteorder"] = value.decode()
    if records.find(".storage_alignment") is not None:
        value = _small_record(ctx, records.find(".storage_alignment")) or b""
        try:
            int(value)
        except ValueError:
            container.reject(f".storage_alignment {value!r} is not a number (torch.load fails)")


def _stoull(text: bytes) -> int | None:
    """``std::stoull``: leading whitespace, an optional sign, base-10 digits, then anything."""
    stripped = text.lstrip(b" \t\n\v\f\r")
    negative = stripped[:1] == b"-"
    if stripped[:1] in (b"+", b"-"):
        stripped = stripped[1:]
    digits = len(stripped) - len(stripped.lstrip(b"0123456789"))
    if not digits:
        return None
    value = int(stripped[:digits])
    return (2**64 - value) % 2**64 if negative else value


def _decode_member(
    container: Container,
    ctx: ZipContext,
    member: ZipMember,
    role: str,
    loaders: tuple[str, ...],
    weak: bool = False,
) -> PickleMember | None:
    """Decode ``member`` as a pickle. ``weak``: it may be plain data, and then None comes back
    (it holds a pickle only if it decodes to STOP, or imports or calls something first)."""
    loaded = TORCH_LOAD in loaders or EXPORT_LOAD in loaders
    refusal = ZipDirectory.check_extractable(member)
    if refusal is not None and loaded:
        container.reject(f"torch.load cannot extract it: {refusal}")
    try:
        stream = MemberStream(ctx.raw, member, ctx.budgets.max_bytes, ctx.meter)
    except BudgetExceeded as exc:
        result = PickleResult(None, 0, [], [], [], [], 0, 0, 0)
        result.stop = Stop(f"too large to vet: {exc}", 0, "budget")
        found = PickleMember(ctx.prefix + member.name, role, loaders, result)
        container.pickles.append(found)
        return found
    except ZipError as exc:
        if loaded:
            container.reject(f"torch.load cannot extract it: {exc}")
        return None
    mapping = _TORCH_MODULE_MAPPING if role == "data" else None
    result = run_pickle(
        stream, 0, meter=ctx.meter, size=member.size, seekable=False, module_mapping=mapping
    )
    if weak and not _holds_pickle(result):
        return None
    if loaded and (result.stop is None or result.stop.kind != "budget"):
        while stream.read(1 << 20):  # miniz extracts the whole member before torch unpickles
            pass
        error = stream.extraction_error()
        if error is not None:
            container.reject(f"torch.load cannot extract {member.name}: {error}")
        elif stream.crc != member.crc:
            container.trick(
                f"its CRC-32 is {member.crc:#010x}, its data's {stream.crc:#010x}: torch does not "
                "check it, Python's zipfile refuses the member (corruption, or a trick to blind "
                "scanners built on zipfile)",
                ctx.prefix + member.name,
                member.header_offset,
                "bad-checksum",
                severity="warning",
            )
    found = PickleMember(ctx.prefix + member.name, role, loaders, result)
    container.pickles.append(found)
    return found


def _holds_pickle(result: PickleResult) -> bool:
    """By content: it decodes to STOP, or gets as far as importing something importable.

    A text member that happens to start with ``c`` ("class Foo:", "cuda: true") reads
    as a GLOBAL of module "lass Foo:"; no unpickler can import that, so it is data.
    """
    if result.complete or result.anomalies:
        return True
    return any(_importable(glob.module) and _importable(glob.name) for glob in result.globals)


def _importable(dotted: str) -> bool:
    return all(part.isidentifier() for part in dotted.split("."))


def _mark_storages(
    container: Container,
    ctx: ZipContext,
    records: TorchRecords,
    data: PickleResult,
    consumed: set[int],
) -> None:
    for ref in data.persistent_ids:
        pid = ref.pid
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"):
            continue
        key = str(pid[2])
        member = records.find(f"data/{key}")
        if member is None or member.index in consumed:
            continue
        consumed.add(member.index)
        container.storages[key] = member.size
        container.storage_members[key] = member.name
        if ctx.probe_storages and _starts_like_pickle(ctx, member):
            # torch reads a storage as raw bytes; one that is also a pickle is a payload
            # for whatever else might unpickle it.
            _decode_member(container, ctx, member, role="extra", loaders=(), weak=True)


def _starts_like_pickle(ctx: ZipContext, member: ZipMember) -> bool:
    if member.size < 2 or member.data_offset < 0:
        return False
    try:
        head = MemberStream(ctx.raw, member, ctx.budgets.max_bytes, ctx.meter).read(2)
    except (ZipError, BudgetExceeded):
        return False
    return head in _PROTO_HEADS


def _probe(container: Container, ctx: ZipContext, member: ZipMember, payload: bool) -> None:
    """Any other member: a nested archive, a pickle, or data."""
    if member.is_directory or member.size == 0 or member.data_offset < 0:
        return
    # every entry visited costs, each time: entries pointing at one nested archive fan out
    ctx.meter.charge_opcodes(1, member.header_offset)
    try:
        head = MemberStream(ctx.raw, member, ctx.budgets.max_bytes, ctx.meter).read(4)
    except BudgetExceeded as exc:
        container.trick(f"member too large to vet: {exc}", ctx.prefix + member.name, 0, "too-large")
        return
    except ZipError:
        return
    if head == LOCAL_SIG:
        _nested(container, ctx, member)
        return
    if payload and member.raw_name.endswith(b".so"):
        container.trick(
            "a compiled shared library: torch._inductor.aoti_load_package loads and runs it",
            ctx.prefix + member.name,
            0,
            "native-code",
        )
        return
    role = "payload" if payload else "extra"
    loaders = (EXPORT_LOAD,) if payload else ()
    _decode_member(container, ctx, member, role=role, loaders=loaders, weak=True)


def _nested(container: Container, ctx: ZipContext, member: ZipMember) -> None:
    where = ctx.prefix + member.name
    if ctx.depth + 1 > MAX_NESTING:
        container.trick(
            f"archives nested more than {MAX_NESTING} deep: too deep to vet", where, 0, "too-large"
        )
        return
    key = (
        (ctx.base, member.data_offset, member.size, member.method) if ctx.base is not None else None
    )
    if key is not None and key in ctx.visited:
        # the same bytes again (entries that share their data fan out): it costs what it cost,
        # every time, without reading it again
        ctx.meter.charge_opcodes(ctx.visited[key], member.header_offset)
        return
    before = ctx.meter.opcodes
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as spool:
        inner: ByteStream
        if member.method == 0:
            inner = WindowFile(ctx.raw, member.data_offset, member.size)
        else:
            # a compressed inner archive is read at random offsets: inflate it once, to disk
            # past a few MiB, within the file's byte budget
            stream = MemberStream(ctx.raw, member, ctx.budgets.max_bytes, ctx.meter)
            while chunk := stream.read(1 << 20):
                spool.write(chunk)
            inner = cast(ByteStream, spool)
        child = Container(container.path, "zip", file_size=member.size)
        base = f"{ctx.base}+{member.data_offset}" if member.method == 0 and key else None
        sub = ZipContext(inner, member.size, ctx.meter, ctx.probe_storages, ctx.depth + 1,
                         where + "!", base, ctx.visited)  # fmt: skip
        read_torch_zip(child, sub)
    if key is not None:
        ctx.visited[key] = max(1, ctx.meter.opcodes - before)
    container.notes.append(f"nested archive {where} ({child.format})")
    container.pickles += child.pickles
    container.tricks += child.tricks
