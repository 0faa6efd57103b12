"""Open a checkpoint and pull out its pickles without executing them.

Formats: the torch zip format (``torch.save`` since 1.6: ``<archive>/data.pkl``
plus raw storages under ``<archive>/data/<key>``), the legacy torch format (five
stacked pickles -- magic number, protocol, sys_info, the object, the storage
keys -- then raw storages), plain pickles (possibly stacked), safetensors (an
8-byte length and a JSON header), and sharded Hugging Face checkpoints
(``*.index.json`` naming the shard files).

Only the pickles, the zip directory and the safetensors header are read:
storages are never touched, so the cost is independent of the tensor bytes.
Every read goes through :class:`TrackedFile`, which records what was read.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from torchwise.ckpt.pickle_vm import PickleParseError, PickleResult, run_pickle
from torchwise.errors import TorchwiseError

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_ROLES = ("legacy magic number", "legacy protocol", "legacy sys_info", "data", "keys")
_TORCH_META = {"byteorder", "version", ".format_version", ".storage_alignment"}
_MAX_NESTING = 4


class TrackedFile(io.RawIOBase):
    """An unbuffered file that records every byte range it reads.

    zipfile never reads past a member's data, so with this underneath we can prove
    (and test) that no storage byte is read.
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = path.open("rb")
        self.ranges: list[tuple[int, int]] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer: Any) -> int:
        start = self._file.tell()
        n = self._file.readinto(buffer)
        if n:
            self.ranges.append((start, start + n))
        return n or 0

    def close(self) -> None:
        self._file.close()
        super().close()

    @property
    def bytes_read(self) -> int:
        return sum(end - start for start, end in self.ranges)


@dataclass
class PickleMember:
    """One pickle found in the file. ``role`` is ``data`` for the one torch.load rebuilds."""

    name: str
    role: str
    result: PickleResult


@dataclass
class MemberError:
    name: str
    error: PickleParseError


@dataclass
class SafetensorsEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass
class Container:
    path: Path
    format: str
    pickles: list[PickleMember] = field(default_factory=list)
    errors: list[MemberError] = field(default_factory=list)
    #: storage key -> bytes present in the file for it
    storages: dict[str, int] = field(default_factory=dict)
    safetensors: list[SafetensorsEntry] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: structural damage outside any pickle (truncated storages)
    problems: list[str] = field(default_factory=list)
    children: list[Container] = field(default_factory=list)
    file_size: int = 0
    read_ranges: list[tuple[int, int]] = field(default_factory=list)

    @property
    def data(self) -> PickleMember | None:
        return next((p for p in self.pickles if p.role == "data"), None)

    @property
    def bytes_read(self) -> int:
        own = sum(end - start for start, end in self.read_ranges)
        return own + sum(child.bytes_read for child in self.children)


def corrupt(path: Path, what: str) -> TorchwiseError:
    return TorchwiseError(
        f"{path}: {what}",
        hint="the file is corrupt or truncated (an interrupted download?); fetch it again",
    )


def read_container(path: Path) -> Container:
    """Identify ``path``'s format and symbolically read every pickle in it."""
    if path.is_dir() or path.name.endswith(".index.json"):
        return _read_sharded(path)
    if not path.is_file():
        raise TorchwiseError(f"{path}: no such file", hint="check the path")
    with TrackedFile(path) as raw:
        size = path.stat().st_size
        head = raw.read(16) or b""
        raw.seek(0)
        if size == 0:
            raise corrupt(path, "the file is empty")
        if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
            container = Container(path, "torch-zip", file_size=size)
            try:
                with zipfile.ZipFile(raw) as archive:
                    _read_zip(container, archive, prefix="", depth=0)
            except (zipfile.BadZipFile, EOFError, OSError) as exc:
                raise corrupt(path, f"broken zip archive ({exc})") from None
        elif _looks_like_safetensors(head, size):
            container = _read_safetensors(path, raw, size)
        elif _is_tar(raw):
            raise TorchwiseError(
                f"{path}: a tar archive (the torch.save format of PyTorch < 1.0)",
                hint="torchwise reads zip, legacy, pickle and safetensors checkpoints only",
            )
        else:
            container = Container(path, "pickle", file_size=size)
            _read_stacked(container, cast(IO[bytes], raw), size)  # the decoder buffers reads
        container.read_ranges = raw.ranges
    return container


def _is_tar(raw: TrackedFile) -> bool:
    raw.seek(257)
    magic = raw.read(5)
    raw.seek(0)
    return magic == b"ustar"


# --- zip -----------------------------------------------------------------------------


def _read_zip(container: Container, archive: zipfile.ZipFile, prefix: str, depth: int) -> None:
    infos = [i for i in archive.infolist() if not i.is_dir()]
    names = {i.filename for i in infos}
    # torch.load unpickles "<archive>/data.pkl" where <archive> is the first entry's folder.
    top = infos[0].filename.split("/", 1)[0] if infos else ""
    main = (
        f"{top}/data.pkl"
        if f"{top}/data.pkl" in names
        else ("data.pkl" if "data.pkl" in names else None)
    )
    root = main.rsplit("data.pkl", 1)[0] if main else ""
    referenced: set[str] = set()
    if main is not None:
        member = _parse_member(container, archive, main, prefix, role="data")
        if member is not None:
            referenced = {f"{root}data/{k}" for k in storage_keys(member.result)}
    else:
        container.format = "zip"
    if any(n.startswith(f"{root}code/") for n in names):
        container.format = "torchscript"
        container.notes.append(
            "TorchScript archive: code/ holds TorchScript that torch.jit.load runs"
        )
    for info in infos:
        name = info.filename
        short = name[len(root) :] if name.startswith(root) else name
        if name == main or short in _TORCH_META or short.startswith(".data/"):
            continue
        if name in referenced:
            container.storages[name.rsplit("/", 1)[1]] = info.file_size
            continue
        _probe_member(container, archive, info, prefix, depth)


def _probe_member(
    container: Container, archive: zipfile.ZipFile, info: zipfile.ZipInfo, prefix: str, depth: int
) -> None:
    with archive.open(info) as stream:
        head = stream.read(2)
    if head == b"PK" and depth < _MAX_NESTING:
        try:
            with archive.open(info) as stream, zipfile.ZipFile(stream) as inner:
                _read_zip(container, inner, f"{prefix}{info.filename}!", depth + 1)
            container.notes.append(f"nested archive {prefix}{info.filename}")
            return
        except zipfile.BadZipFile:
            pass
    strong = (len(head) == 2 and head[0] == 0x80 and head[1] <= 5) or info.filename.endswith(
        (".pkl", ".pickle")
    )
    _parse_member(container, archive, info.filename, prefix, role="extra", quiet=not strong)


def _parse_member(
    container: Container,
    archive: zipfile.ZipFile,
    name: str,
    prefix: str,
    role: str,
    quiet: bool = False,
) -> PickleMember | None:
    with archive.open(name) as stream:
        try:
            result = run_pickle(stream)
        except PickleParseError as exc:
            # A member that does not parse is data (TorchScript source starts with "class",
            # which reads as GLOBAL) unless the unpickler would already have called something.
            if not quiet or exc.partial.calls:
                container.errors.append(MemberError(prefix + name, exc))
            return None
    member = PickleMember(prefix + name, role if not prefix else "extra", result)
    container.pickles.append(member)
    return member


def storage_keys(result: PickleResult) -> list[str]:
    """Storage keys named by torch persistent ids: ('storage', type, key, location, numel)."""
    keys = []
    for ref in result.persistent_ids:
        pid = ref.pid
        if isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage":
            keys.append(str(pid[2]))
    return keys


# --- legacy and plain pickles ---------------------------------------------------------


def _read_stacked(container: Container, stream: IO[bytes], size: int) -> None:
    """Read consecutive pickles: the legacy torch format is five of them, then storages."""
    index = 0
    while stream.tell() < size:
        start = stream.tell()
        name = f"pickle #{index + 1} at byte {start}"
        try:
            result = run_pickle(stream, start, rewind=True)
        except PickleParseError as exc:
            if index == 0 and not exc.partial.n_ops > 1:
                raise corrupt(
                    container.path, "not a checkpoint: neither a zip, a pickle nor safetensors"
                ) from None
            if index == 0 or exc.partial.calls:
                container.errors.append(MemberError(name, exc))
            else:
                container.notes.append(f"{size - start} trailing bytes that are not a pickle")
            return
        if index == 0 and result.value == LEGACY_MAGIC:
            container.format = "torch-legacy"
        legacy = container.format == "torch-legacy"
        role = (
            (_LEGACY_ROLES[index] if index < 5 else "extra")
            if legacy
            else ("data" if index == 0 else "extra")
        )
        container.pickles.append(PickleMember(name, role, result))
        index += 1
        if legacy and index == 5:
            _check_legacy_storages(container, result, stream.tell(), size)
            return


def _check_legacy_storages(container: Container, keys: PickleResult, at: int, size: int) -> None:
    from torchwise.ckpt.tensors import storage_element_size

    data = container.data
    numels: dict[str, int] = {}
    if data is not None:
        for ref in data.result.persistent_ids:
            pid = ref.pid
            if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
                numels[str(pid[2])] = int(pid[4]) * storage_element_size(pid[1], None)
    expected = 0
    for key in keys.value if isinstance(keys.value, list) else []:
        nbytes = numels.get(str(key), 0)
        container.storages[str(key)] = nbytes
        expected += 8 + nbytes  # an int64 element count, then the raw bytes
    if at + expected > size:
        container.problems.append(
            f"truncated legacy checkpoint: storages need {expected} bytes after byte {at}, "
            f"the file has {size - at}"
        )


# --- safetensors ----------------------------------------------------------------------


def _looks_like_safetensors(head: bytes, size: int) -> bool:
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= size - 8 and head[8:9] == b"{"


_ST_SIZES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "C64": 8,
}


def _read_safetensors(path: Path, raw: TrackedFile, size: int) -> Container:
    (n,) = struct.unpack("<Q", raw.read(8) or b"")
    try:
        header = json.loads((raw.read(n) or b"").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise corrupt(path, f"safetensors header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise corrupt(path, "safetensors header is not a JSON object")
    container = Container(path, "safetensors", file_size=size)
    data_size = size - 8 - n
    for name, entry in header.items():
        if name == "__metadata__":
            container.metadata = dict(entry) if isinstance(entry, dict) else {}
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            numel = 1
            for dim in shape:
                numel *= int(dim)
        except (KeyError, TypeError, ValueError):
            raise corrupt(path, f"safetensors entry {name!r} is malformed") from None
        if not 0 <= begin <= end <= data_size:
            raise corrupt(path, f"tensor {name!r} lies outside the file (truncated?)")
        if dtype in _ST_SIZES and numel * _ST_SIZES[dtype] != end - begin:
            raise corrupt(path, f"tensor {name!r}: {end - begin} bytes for {dtype}{shape}")
        container.safetensors.append(SafetensorsEntry(name, dtype, tuple(shape), end - begin))
    return container


# --- sharded Hugging Face checkpoints ---------------------------------------------------


def _read_sharded(path: Path) -> Container:
    if path.is_dir():
        indexes = sorted(path.glob("*.index.json"))
        if not indexes:
            raise TorchwiseError(
                f"{path}: a directory without a *.index.json",
                hint="pass a checkpoint file, or the directory of a sharded checkpoint",
            )
        path = indexes[0]
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
        weight_map: dict[str, str] = dict(index["weight_map"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TorchwiseError(f"{path}: not a sharded-checkpoint index ({exc})") from None
    container = Container(path, "hf-sharded", metadata=dict(index.get("metadata") or {}))
    for shard in sorted(set(weight_map.values())):
        shard_path = path.parent / shard
        if not shard_path.is_file():
            raise TorchwiseError(
                f"{path}: shard {shard} is missing", hint="download every shard the index lists"
            )
        container.children.append(read_container(shard_path))
        container.file_size += shard_path.stat().st_size
    container.metadata["weight_map"] = weight_map
    return container
