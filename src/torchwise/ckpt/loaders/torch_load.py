"""Open a checkpoint and pull out its pickles without executing them, in torch.load's order.

``torch.load(path)`` decides what a file is in this order, and so does
:func:`read_container`:

1. the first four bytes are ``PK\\x03\\x04``: the zip route (:mod:`.archive`);
2. otherwise ``tarfile.open`` is tried on the file: a valid tar header (its
   checksum, not the ``ustar`` magic, decides) is a pre-1.0 tar checkpoint
   (:mod:`.tarread`);
3. otherwise the file is unpickled from byte 0: the legacy format is five stacked
   pickles (magic number, protocol, sys_info, the object, the storage keys) then
   raw storages; a plain pickle is one object (torch.load then raises "invalid
   magic number", after unpickling it).

A safetensors file is recognised only when the pickle route finds no pickle at
byte 0 (a pickle whose first eight bytes look like a safetensors header is a
pickle to torch.load). A tar file is also decoded from byte 0, as
``torch.load(io.BytesIO(...))`` would (a buffer skips the tar attempt). Sharded
Hugging Face checkpoints (a folder with ``*.index.json``) are read shard by shard.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from torchwise.ckpt.budgets import DEFAULT_BUDGETS, Budgets, Meter
from torchwise.ckpt.formats.container import Container, PickleMember, SafetensorsEntry, TrackedFile
from torchwise.ckpt.formats.tarfmt import open_tar, read_tar
from torchwise.ckpt.loaders.torch_zip import ZipContext, read_torch_zip
from torchwise.ckpt.picklevm.machine import run_pickle
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.ckpt.picklevm.values import PickleResult
from torchwise.errors import TorchwiseError

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
_LEGACY_ROLES = ("legacy magic number", "legacy protocol", "legacy sys_info", "data", "keys")


def corrupt(path: Path, what: str) -> TorchwiseError:
    return TorchwiseError(
        f"{path}: {what}",
        hint="the file is corrupt or truncated (an interrupted download?); fetch it again",
    )


def read_container(
    path: Path, budgets: Budgets = DEFAULT_BUDGETS, *, probe_storages: bool = False
) -> Container:
    """Identify ``path``'s format as torch.load would and symbolically read every pickle.

    ``probe_storages`` also decodes every zip storage that starts like a pickle
    (the scan does; inspect reads no storage byte).
    """
    if path.is_dir() or path.name.endswith(".index.json"):
        return _read_sharded(path, budgets, probe_storages)
    if not path.is_file():
        raise TorchwiseError(f"{path}: no such file", hint="check the path")
    meter = Meter(budgets)
    with TrackedFile(path) as raw:
        size = path.stat().st_size
        container = Container(path, "unknown", file_size=size)
        if size == 0:
            container.reject("the file is empty")
            return container
        head = raw.read(16) or b""
        if head[:4] == b"PK\x03\x04":
            read_torch_zip(container, ZipContext(raw, size, meter, probe_storages))
        else:
            _read_legacy_route(container, raw, size, head, meter)
        container.read_ranges = raw.ranges
    return container


def _read_legacy_route(
    container: Container, raw: TrackedFile, size: int, head: bytes, meter: Meter
) -> None:
    try:
        tar = open_tar(raw)
    except Exception as exc:  # torch.load lets anything but TarError out of tarfile.open
        container.reject(f"torch.load's tar attempt fails ({type(exc).__name__}: {exc})")
        tar = None
    if tar is not None:
        with tar:
            read_tar(container, raw, tar, meter)
        # torch.load(io.BytesIO(...)) skips the tar attempt and unpickles byte 0.
        _read_stacked(container, raw, size, meter, loaded=False)
        return
    found = _read_stacked(container, raw, size, meter, loaded=True)
    if not found:
        if _looks_like_safetensors(head, size):
            _read_safetensors(container, raw, size)
        else:
            container.format = "unknown"
            container.reject("not a checkpoint: neither a zip, a tar, a pickle nor safetensors")


def _read_stacked(
    container: Container, raw: ByteStream, size: int, meter: Meter, loaded: bool
) -> bool:
    """Read consecutive pickles from byte 0. False when byte 0 starts no pickle at all."""
    at, index, legacy = 0, 0, False
    torch_reads = loaded  # whether torch.load goes on to this pickle
    while at < size:
        result = run_pickle(raw, at, meter=meter, size=size, rewind=True)
        if index == 0 and not _is_a_pickle(result):
            return False
        if index > 0 and not _holds_pickle(result):
            container.notes.append(f"{size - at:,} bytes after the last pickle are not a pickle")
            return True
        if index == 0 and loaded:
            legacy = _legacy_magic(result.value)
            container.format = "torch-legacy" if legacy else "pickle"
        roles = _LEGACY_ROLES if legacy else ("data",)
        role = roles[index] if index < len(roles) else "extra"
        name = f"pickle #{index + 1} at byte {at}"
        container.pickles.append(PickleMember(name, role, torch_reads, result))
        if result.frame_past_stop:
            container.trick(
                "a FRAME runs past this pickle's STOP: where the next pickle starts depends "
                "on the reader's buffering, so readers disagree on what follows",
                name,
                result.end,
                "frame-confusion",
            )
        if not result.complete:
            return True
        torch_reads = torch_reads and _torch_goes_on(index, result.value, legacy)
        index += 1
        at = result.end
        if legacy and index == 5:
            _check_legacy_storages(container, result, at, size)
            return True
    return True


def _is_a_pickle(result: PickleResult) -> bool:
    """Byte 0 starts a pickle: it decodes, or gets past its first opcode before failing."""
    return result.complete or result.n_ops > 1 or _holds_pickle(result)


def _holds_pickle(result: PickleResult) -> bool:
    return result.complete or bool(result.globals or result.calls or result.anomalies)


def _legacy_magic(value: object) -> bool:
    """The magic number check: a value the scan cannot evaluate counts as passing it."""
    from torchwise.ckpt.picklevm.values import is_plain

    return value == LEGACY_MAGIC if is_plain(value) else True


def _torch_goes_on(index: int, value: object, legacy: bool) -> bool:
    from torchwise.ckpt.picklevm.values import is_plain

    if not legacy:
        return False  # torch.load raises "invalid magic number" after the first pickle
    if index == 1:
        return value == LEGACY_PROTOCOL if is_plain(value) else True
    return True


def _check_legacy_storages(container: Container, keys: PickleResult, at: int, size: int) -> None:
    from torchwise.ckpt.tensors import storage_element_size

    data = container.data
    numels: dict[str, int] = {}
    if data is not None:
        for ref in data.result.persistent_ids:
            pid = ref.pid
            if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
                numel = pid[4] if isinstance(pid[4], int) else 0
                numels[str(pid[2])] = numel * storage_element_size(pid[1], None)
    expected = 0
    for key in keys.value if isinstance(keys.value, list) else []:
        nbytes = numels.get(str(key), 0)
        container.storages[str(key)] = nbytes
        expected += 8 + nbytes  # an int64 element count, then the raw bytes
    if at + expected > size:
        container.reject(
            f"truncated legacy checkpoint: storages need {expected:,} bytes after byte {at:,}, "
            f"the file has {size - at:,}"
        )


# --- safetensors ----------------------------------------------------------------------


def _looks_like_safetensors(head: bytes, size: int) -> bool:
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= size - 8 and head[8:9] == b"{"


_ST_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
             "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
             "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1, "C64": 8}  # fmt: skip


def _read_safetensors(container: Container, raw: ByteStream, size: int) -> None:
    container.format = "safetensors"
    raw.seek(0)
    (n,) = struct.unpack("<Q", raw.read(8) or b"")
    try:
        header = json.loads((raw.read(n) or b"").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        container.reject(f"safetensors header is not valid JSON ({exc})")
        return
    if not isinstance(header, dict):
        container.reject("safetensors header is not a JSON object")
        return
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
            container.reject(f"safetensors entry {name!r} is malformed")
            return
        if not 0 <= begin <= end <= data_size:
            container.reject(f"tensor {name!r} lies outside the file (truncated?)")
            return
        if dtype in _ST_SIZES and numel * _ST_SIZES[dtype] != end - begin:
            container.reject(f"tensor {name!r}: {end - begin} bytes for {dtype}{shape}")
            return
        container.safetensors.append(SafetensorsEntry(name, dtype, tuple(shape), end - begin))


# --- sharded Hugging Face checkpoints ---------------------------------------------------


def _read_sharded(path: Path, budgets: Budgets, probe_storages: bool) -> Container:
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
        container.children.append(
            read_container(shard_path, budgets, probe_storages=probe_storages)
        )
        container.file_size += shard_path.stat().st_size
    container.metadata["weight_map"] = weight_map
    return container
