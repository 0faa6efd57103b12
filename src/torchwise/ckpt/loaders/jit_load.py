"""``torch.jit.load``'s route: which files it runs TorchScript code from.

``torch.jit.load(f)`` hands the path (or the bytes of a file object) to
``import_ir_module``, which looks at the first 8 bytes:

1. ``PTMF`` at bytes 4-7: a flatbuffer mobile module. It is checked *before*
   the zip signature, and loading it runs the module's ``__setstate__``
   methods (compiled TorchScript). torch.load cannot read such a file at all.
2. otherwise the whole file goes to ``PyTorchStreamReader``: miniz finds the
   end record from the end of the file, so the file need not start with
   ``PK\\x03\\x04`` (a zip appended to a pickle opens), the same constructor
   checks as torch.load's (``PYTORCH1`` refused, a first member in a folder, a
   version record of 1 to 10), then ``model.json`` (the legacy format) or
   ``constants.pkl``, looked up ASCII-case-insensitively under the folder
   prefix. Found, the code under ``code/`` is compiled and each restored
   object's ``__setstate__`` runs.

A file that starts with ``PK\\x03\\x04`` is read on torch.load's zip route,
which applies the same lookups (:func:`torchwise.ckpt.loaders.torch_zip.flag_torchscript`);
this module covers the files torch.load does not take for a zip.
"""

from __future__ import annotations

from torchwise.ckpt.budgets import Meter
from torchwise.ckpt.formats.container import Container
from torchwise.ckpt.formats.zipdir import ZipError, read_directory
from torchwise.ckpt.loaders.names import JIT_LOAD
from torchwise.ckpt.loaders.torch_zip import ZipContext, check_version, torch_records
from torchwise.ckpt.picklevm.source import ByteStream

FLATBUFFER_MAGIC = b"PTMF"
_PREVIEW_MAGIC = b"PYTORCH1"


def read_jit_route(container: Container, raw: ByteStream, size: int, meter: Meter) -> None:
    """Record on ``container`` what torch.jit.load does with the file (its route, any code)."""
    raw.seek(0)
    head = raw.read(8) or b""
    if len(head) == 8 and head[4:8] == FLATBUFFER_MAGIC:
        container.format = "torchscript-flatbuffer"
        container.trick(
            "a flatbuffer TorchScript module (PTMF at byte 4): torch.jit.load checks for it "
            "before the zip signature and runs the module's __setstate__ methods while loading",
            "flatbuffer",
            4,
            "torchscript",
            loaders=(JIT_LOAD,),
        )
        container.route(JIT_LOAD, None)
        return
    if head[:4] == b"PK\x03\x04":
        return  # torch.load's zip route read the same archive with the same lookups
    if len(head) == 8 and head == _PREVIEW_MAGIC:
        container.route(JIT_LOAD, "a preview-release archive (torch.jit.load refuses it)")
        return
    try:
        directory = read_directory(raw, size)
    except ZipError as exc:
        container.route(JIT_LOAD, f"not a zip archive to torch's reader ({exc})")
        return
    probe = Container(container.path, "zip", file_size=size)
    records = torch_records(probe, directory)
    check_version(probe, ZipContext(raw, size, meter, probe_storages=False), records)
    found = records.find("constants.pkl") or records.find("model.json")
    if probe.failure is not None or found is None:
        reason = probe.failure or "no constants.pkl: not a TorchScript archive"
        container.route(JIT_LOAD, reason)
        return
    start = min(m.header_offset for m in directory.members)
    container.trick(
        f"a TorchScript archive that starts at byte {start} (after {_head_kind(head)}): "
        "torch.jit.load's reader finds it from the end of the file, "
        "compiles its code and runs its __setstate__ methods; torch.load reads only the start",
        "zip structure",
        directory.eocd_offset,
        "torchscript",
        loaders=(JIT_LOAD,),
    )
    container.notes.append(
        f"a zip archive inside the file (torch.jit.load reads it, from {found.name})"
    )
    container.route(JIT_LOAD, None)


def _head_kind(head: bytes) -> str:
    return "a pickle" if head[:1] == b"\x80" else "other bytes"
