"""The pre-1.0 tar checkpoints, read the way ``torch.load``'s ``legacy_load`` reads them.

Before the stacked-pickle format, ``torch.save`` wrote a tar archive with three
members, and ``torch.load`` still reads it (``weights_only=False`` only):

- ``storages``: a pickle with the count, then per storage a pickle
  ``(key, location, storage_type)``, an int64 element count and the raw bytes
  (``element_size`` from the storage type); then a pickle of storage views;
- ``tensors``: a pickle with the count, then per tensor a pickle
  ``(key, storage_id, tensor_type)``, an int32 ``ndim`` (plus 4 padding bytes),
  ``ndim`` sizes, ``ndim`` strides and an int64 storage offset;
- ``pickle``: the object, tensors as persistent ids.

``torch.load`` extracts ``storages`` and ``tensors`` to a temporary directory and
opens what it extracted: a member that is a link makes it read whatever the link
points to on the scanning machine, which no scan can vet. Every pickle in the
three members is judged; where the raw data between them cannot be measured
(an unknown storage type), the rest of the member cannot be vetted.
"""

from __future__ import annotations

import struct
import tarfile
from typing import Any, cast

from torchwise.ckpt.budgets import Meter
from torchwise.ckpt.formats.container import Container, PickleMember, WindowFile
from torchwise.ckpt.loaders.names import TORCH_LOAD
from torchwise.ckpt.picklevm.machine import run_pickle
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.ckpt.picklevm.values import Global, PickleResult
from torchwise.ckpt.tensors import ELEMENT_SIZE, STORAGE_DTYPES

_INT64 = struct.Struct("<q")
_INT32 = struct.Struct("<i")


def open_tar(raw: ByteStream) -> tarfile.TarFile | None:
    """What ``tarfile.open(fileobj=f, mode="r:", format=PAX_FORMAT)`` gives torch.load.

    None when it raises ``TarError`` (torch.load then unpickles the file); any other
    exception propagates, as it does out of torch.load.
    """
    raw.seek(0)
    try:
        return tarfile.open(fileobj=cast(Any, raw), mode="r:", format=tarfile.PAX_FORMAT)
    except tarfile.TarError:
        return None
    finally:
        raw.seek(0)


def read_tar(container: Container, raw: ByteStream, tar: tarfile.TarFile, meter: Meter) -> None:
    container.format = "torch-tar"
    container.notes.append(
        "a pre-1.0 tar checkpoint: torch.load reads it only with weights_only=False"
    )
    try:
        members = tar.getmembers()
    except tarfile.TarError as exc:
        container.reject(f"a broken tar archive ({exc})")
        return
    by_name = {m.name: m for m in members}  # getmember() returns the last of a name
    reader = _TarReader(container, raw, meter)
    for name in ("storages", "tensors"):
        member = by_name.get(name)
        if member is None:
            container.reject(f"the tar archive has no {name!r} member (torch.load fails)")
            return
        if member.islnk() or member.issym():
            container.trick(
                f"the {name!r} member is a link to {member.linkname!r}: torch.load extracts it "
                "and unpickles whatever it points to on this machine",
                f"tar:{name}",
                member.offset,
                "tar-link",
            )
            continue
        if member.issparse() or not member.isreg():
            container.trick(
                f"the {name!r} member is a {_kind(member)}: torch.load reads what tarfile "
                "extracts, which the scan cannot vet",
                f"tar:{name}",
                member.offset,
                "tar-link",
            )
            continue
        window = WindowFile(raw, member.offset_data, member.size)
        if name == "storages":
            reader.storages(window, member.size)
        else:
            reader.tensors(window, member.size)
    pickle_member = by_name.get("pickle")
    if pickle_member is None:
        container.reject("the tar archive has no 'pickle' member (torch.load fails)")
        return
    try:  # extractfile() follows a link to another member of the archive
        target = pickle_member
        while target.issym() or target.islnk():
            target = cast(Any, tar)._find_link_target(target)  # what extractfile() does
    except KeyError:
        container.reject("the 'pickle' member links to nothing (torch.load fails)")
        return
    if not target.isreg() or target.issparse():
        container.trick(
            f"the 'pickle' member is a {_kind(pickle_member)}", "tar:pickle", 0, "tar-link"
        )
        return
    window = WindowFile(raw, target.offset_data, target.size)
    reader.decode(window, target.size, "tar:pickle", role="data")
    for member in members:
        if member.isreg() and member.name not in ("storages", "tensors", "pickle"):
            reader.probe(WindowFile(raw, member.offset_data, member.size), member)


def _kind(member: tarfile.TarInfo) -> str:
    if member.issparse():
        return "sparse file"
    if member.isdir():
        return "directory"
    if member.issym() or member.islnk():
        return "link"
    return "special file"


class _TarReader:
    def __init__(self, container: Container, raw: ByteStream, meter: Meter) -> None:
        self.container = container
        self.raw = raw
        self.meter = meter
        #: tar "tensors" key -> (storage key, sizes, strides, offset)
        self.tensor_table: dict[Any, tuple[Any, tuple[int, ...], tuple[int, ...], int]] = {}
        #: storage key -> (dtype, element count)
        self.storage_table: dict[Any, tuple[str, int]] = {}

    def decode(
        self, stream: WindowFile, size: int, name: str, role: str = "tar-storages"
    ) -> PickleResult:
        result = run_pickle(stream, stream.tell(), meter=self.meter, size=size, rewind=True)
        self.container.pickles.append(PickleMember(name, role, (TORCH_LOAD,), result))
        return result

    def storages(self, stream: WindowFile, size: int) -> None:
        count = self.decode(stream, size, "tar:storages pickle #1")
        if not _usable(count) or not isinstance(count.value, int):
            return
        for index in range(count.value):
            if stream.tell() >= size:
                self.container.reject("the storages member ends early (torch.load fails)")
                return
            args = self.decode(stream, size, f"tar:storages pickle #{index + 2}")
            if not _usable(args):
                return
            element = _element_size(args.value)
            if element is None:
                self._cannot_measure(stream, size, "storages", "an unknown storage type")
                return
            head = stream.read(8)
            if len(head) < 8:
                self.container.reject("the storages member ends early (torch.load fails)")
                return
            (numel,) = _INT64.unpack(head)
            if numel < 0 or stream.tell() + numel * element > size:
                self.container.reject("a storage runs past the storages member (torch.load fails)")
                return
            key, dtype = args.value[0], _dtype(args.value[2])
            self.storage_table[key] = (dtype, numel)
            self.container.storages[str(key)] = numel * element
            stream.seek(stream.tell() + numel * element)
        self.decode(stream, size, f"tar:storages pickle #{count.value + 2} (views)")

    def tensors(self, stream: WindowFile, size: int) -> None:
        count = self.decode(stream, size, "tar:tensors pickle #1", role="tar-tensors")
        if not _usable(count) or not isinstance(count.value, int):
            return
        for index in range(count.value):
            args = self.decode(stream, size, f"tar:tensors pickle #{index + 2}", "tar-tensors")
            if not _usable(args):
                return
            head = stream.read(8)
            if len(head) < 8:
                self.container.reject("the tensors member ends early (torch.load fails)")
                return
            (ndim,) = _INT32.unpack(head[:4])
            body = stream.read(16 * ndim + 8) if ndim >= 0 else b""
            if ndim < 0 or len(body) < 16 * ndim + 8:
                self.container.reject("a tensor record is truncated (torch.load fails)")
                return
            sizes = struct.unpack(f"<{ndim}q", body[: 8 * ndim])
            strides = struct.unpack(f"<{ndim}q", body[8 * ndim : 16 * ndim])
            (offset,) = _INT64.unpack(body[16 * ndim :])
            value = args.value
            if isinstance(value, tuple) and len(value) == 3:
                self.tensor_table[value[0]] = (value[1], sizes, strides, offset)
        self.container.described["tar"] = {
            "tensors": self.tensor_table,
            "storages": self.storage_table,
        }

    def _cannot_measure(self, stream: WindowFile, size: int, member: str, why: str) -> None:
        if stream.tell() < size:
            self.container.trick(
                f"{why} in the {member} member: where its next pickle starts cannot be "
                f"measured, so {size - stream.tell():,} bytes cannot be vetted",
                f"tar:{member}",
                stream.tell(),
                "too-large",
            )

    def probe(self, stream: WindowFile, member: tarfile.TarInfo) -> None:
        result = run_pickle(stream, 0, meter=self.meter, size=member.size)
        if result.complete or result.globals or result.calls or result.anomalies:
            name = f"tar:{member.name}"
            self.container.pickles.append(PickleMember(name, "extra", (), result))


def _usable(result: PickleResult) -> bool:
    """torch.load goes on past this pickle (it decoded completely)."""
    return result.complete and result.torch_stop is None


def _element_size(args: Any) -> int | None:
    if not (isinstance(args, tuple) and len(args) == 3):
        return None
    dtype = _dtype(args[2])
    return ELEMENT_SIZE.get(dtype) if dtype else None


def _dtype(storage_type: Any) -> str:
    # torch.load's find_class turns any "...Storage" name into a StorageType by name.
    if isinstance(storage_type, Global) and "Storage" in storage_type.name:
        return STORAGE_DTYPES.get(storage_type.name, "")
    return ""
