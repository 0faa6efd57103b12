"""Open a checkpoint and pull out its pickles without executing them, in torch.load's order.

``torch.load(path)`` decides what a file is in this order, and so does
:func:`read_container`:

1. the first four bytes are ``PK\\x03\\x04``: the zip route (:mod:`.torch_zip`);
2. otherwise ``tarfile.open`` is tried on the file: a valid tar header (its
   checksum, not the ``ustar`` magic, decides) is a pre-1.0 tar checkpoint
   (:mod:`torchwise.ckpt.formats.tarfmt`);
3. otherwise the file is unpickled from byte 0: the legacy format is five stacked
   pickles (magic number, protocol, sys_info, the object, the storage keys) then
   raw storages; a plain pickle is one object (torch.load then raises "invalid
   magic number", after unpickling it).

The stacked pickles are also what ``pickle.load`` (in a loop) reads, so they
carry both loaders. A tar file is also decoded from byte 0, as
``torch.load(io.BytesIO(...))`` would (a buffer skips the tar attempt).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from torchwise.ckpt.budgets import Meter
from torchwise.ckpt.formats.container import Container, PickleMember
from torchwise.ckpt.formats.tarfmt import open_tar, read_tar
from torchwise.ckpt.loaders.names import PICKLE_LOAD, TORCH_LOAD
from torchwise.ckpt.loaders.torch_zip import ZipContext, read_torch_zip
from torchwise.ckpt.picklevm.machine import run_pickle
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.ckpt.picklevm.values import PickleResult
from torchwise.errors import TorchwiseError

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
_LEGACY_ROLES = ("legacy magic number", "legacy protocol", "legacy sys_info", "data", "keys")


@contextlib.contextmanager
def readable(path: Path) -> Iterator[None]:
    """Any OSError reading ``path`` becomes one line: ``cannot read PATH: reason``."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise TorchwiseError(f"cannot read {path}: {reason}") from None


def corrupt(path: Path, what: str) -> TorchwiseError:
    return TorchwiseError(
        f"{path}: {what}",
        hint="the file is corrupt or truncated (an interrupted download?); fetch it again",
    )


def read_torch_route(
    container: Container, raw: ByteStream, size: int, head: bytes, meter: Meter, probe: bool
) -> None:
    """Fill ``container`` along torch.load's route; ``probe`` decodes storages that look like
    pickles (the scan does; inspect reads no storage byte)."""
    if head[:4] == b"PK\x03\x04":
        read_torch_zip(container, ZipContext(raw, size, meter, probe))
    else:
        _read_legacy_route(container, raw, size, meter)
    container.route(TORCH_LOAD, _torch_failure(container))


def _torch_failure(container: Container) -> str | None:
    """Why torch.load fails on the file (it may have unpickled something first), or None."""
    if container.failure is not None:
        return container.failure
    if container.format == "pt2":
        return "a torch.export archive (torch.export.load reads it; torch.load finds no data.pkl)"
    loaded = [m for m in container.pickles if TORCH_LOAD in m.loaders]
    for member in loaded:
        stop = member.result.stop or member.result.torch_stop
        if stop is not None:
            return f"{member.name}: {stop.message} at byte {stop.offset}"
    if container.format == "pickle":
        return "it unpickles the file, then raises: invalid magic number (not a torch.save file)"
    if not loaded and container.format != "torchscript":
        return "no pickle torch.load would read"
    return None


def _read_legacy_route(container: Container, raw: ByteStream, size: int, meter: Meter) -> None:
    try:
        tar = open_tar(raw)
    except Exception as exc:  # torch.load lets anything but TarError out of tarfile.open
        container.reject(f"torch.load's tar attempt fails ({type(exc).__name__}: {exc})")
        tar = None
    if tar is not None:
        with tar:
            read_tar(container, raw, tar, meter)
        # torch.load(io.BytesIO(...)) skips the tar attempt and unpickles byte 0.
        _read_stacked(container, raw, size, meter, torch_reads=False)
        return
    if not _read_stacked(container, raw, size, meter, torch_reads=True):
        container.reject("not a checkpoint: neither a zip, a tar nor a pickle to torch.load")


def _read_stacked(
    container: Container, raw: ByteStream, size: int, meter: Meter, torch_reads: bool
) -> bool:
    """Read consecutive pickles from byte 0. False when byte 0 starts no pickle at all.

    ``torch_reads``: torch.load unpickles the first (it does not for a tar file's bytes).
    """
    at, index, legacy = 0, 0, False
    from_path = torch_reads
    while at < size:
        result = run_pickle(raw, at, meter=meter, size=size, rewind=True)
        if index == 0 and not _is_a_pickle(result):
            return False
        if index > 0 and not _holds_pickle(result):
            container.notes.append(f"{size - at:,} bytes after the last pickle are not a pickle")
            return True
        if index == 0 and from_path:
            legacy = _legacy_magic(result.value)
            container.format = "torch-legacy" if legacy else "pickle"
        roles = _LEGACY_ROLES if legacy else ("data",)
        role = roles[index] if index < len(roles) else "extra"
        name = f"pickle #{index + 1} at byte {at}"
        loaders = (TORCH_LOAD, PICKLE_LOAD) if torch_reads else (PICKLE_LOAD,)
        container.pickles.append(PickleMember(name, role, loaders, result))
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
