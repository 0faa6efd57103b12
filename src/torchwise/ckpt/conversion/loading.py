"""Let torch rebuild a vetted checkpoint for conversion, without its tensor data when it can.

A torch zip is loaded with ``torch.load(weights_only=True, map_location="meta")``:
torch rebuilds every object and records, per storage, where its bytes start in
the file (``_checkpoint_offset``). That offset is checked against the zip
directory (it must be the start of a stored ``data/`` member) and attached to
the storage as ``_torchwise_source = (path, offset)``, which the writer streams
from. Safetensors shards get meta tensors the same way from their header.
Everything else (the legacy format, plain pickles, quantized or sparse tensors,
and tensors that ``--split`` must take apart) is loaded whole, and says so.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.ckpt.budgets import Budgets
from torchwise.ckpt.conversion.parts import SOURCE
from torchwise.ckpt.conversion.plan import SAFETENSORS_NAMES, Loaded
from torchwise.ckpt.conversion.restricted import restricted_pickle_module
from torchwise.ckpt.formats.container import Container
from torchwise.ckpt.formats.zipdir import read_directory
from torchwise.ckpt.loaders.routes import read_container
from torchwise.ckpt.loaders.torch_load import readable
from torchwise.errors import TorchwiseError

if TYPE_CHECKING:
    import torch

#: rebuild functions whose tensors are not one plain storage view: loaded whole
_WHOLE = frozenset(
    f"torch._utils.{name}"
    for name in ("_rebuild_qtensor", "_rebuild_sparse_tensor", "_rebuild_nested_tensor",
                 "_rebuild_wrapper_subclass", "_rebuild_device_tensor_from_numpy")
)  # fmt: skip
_NAMES_TO_DTYPE = {v: k for k, v in SAFETENSORS_NAMES.items()}


def load_for_conversion(source: Path, extra: list[Any], budgets: Budgets, split: bool) -> Loaded:
    with readable(source):
        container = read_container(source, budgets)
    parts = container.children or [container]
    if container.format == "torchscript":
        raise TorchwiseError(
            f"{source} is a TorchScript archive", hint="convert reads torch.save checkpoints"
        )
    if container.format == "pt2":
        raise TorchwiseError(
            f"{source} is a torch.export archive (.pt2)",
            hint="torch.export.load it, then save its state_dict and convert that",
        )
    values: list[Any] = []
    notes: list[str] = []
    streamed, byteorder = True, str(sys.byteorder)
    for part in parts:
        loaded = _load_part(part, extra, split)
        values.append(loaded.value)
        notes += loaded.notes
        streamed = streamed and loaded.streamed
        byteorder = loaded.byteorder if loaded.streamed else byteorder
    if len(values) == 1:
        return Loaded(values[0], streamed, byteorder, notes)
    merged: dict[Any, Any] = {}
    for value in values:  # shards of one state dict
        merged.update(value)
    return Loaded(merged, streamed, byteorder, notes)


def _load_part(part: Container, extra: list[Any], split: bool) -> Loaded:
    if part.format == "safetensors":
        return _safetensors(part)
    if part.format == "torch-tar":
        raise TorchwiseError(
            f"{part.path} is a pre-1.0 tar checkpoint, which torch.load(weights_only=True) refuses",
            hint="load it with weights_only=False in a process you trust, torch.save it, and "
            "convert that",
        )
    whole_reason = _needs_whole(part)
    if part.format != "torch-zip" or whole_reason:
        reason = whole_reason or f"the {part.format} format has no per-storage offsets"
        return Loaded(_torch_load(part.path, extra, None), False, sys.byteorder,
                      [f"{part.path.name}: loaded whole ({reason})"])  # fmt: skip
    value = _torch_load(part.path, extra, "meta")
    tensors = _tensors(value)
    unsupported = [
        t for t in tensors if str(t.dtype).removeprefix("torch.") not in SAFETENSORS_NAMES
    ]
    if split and unsupported:
        reason = "--split takes tensors apart from their data"
        return Loaded(_torch_load(part.path, extra, None), False, sys.byteorder,
                      [f"{part.path.name}: loaded whole ({reason})"])  # fmt: skip
    if not _attach_sources(part.path, tensors):
        reason = "its storages are not where torch says (a rewritten zip?)"
        return Loaded(_torch_load(part.path, extra, None), False, sys.byteorder,
                      [f"{part.path.name}: loaded whole ({reason})"])  # fmt: skip
    return Loaded(value, True, part.metadata.get("byteorder", "little"))


def _needs_whole(part: Container) -> str | None:
    data = part.data
    if data is None:
        return None
    names = {g.qualname for g in data.result.globals}
    special = sorted(names & _WHOLE)
    if special:
        return f"it has tensors rebuilt by {', '.join(n.rsplit('.', 1)[1] for n in special)}"
    return None


def _torch_load(path: Path, extra: list[Any], map_location: str | None) -> Any:
    """torch.load(weights_only=True); for the opcodes its unpickler lacks (protocols 4 and 5
    write FRAME, MEMOIZE, ...), the C unpickler restricted to the same allowlist."""
    import pickle

    import torch

    location = map_location or "cpu"
    with torch.serialization.safe_globals(extra):
        try:
            return torch.load(path, map_location=location, weights_only=True)
        except pickle.UnpicklingError as exc:
            if "Unsupported operand" not in str(exc):
                raise TorchwiseError(
                    f"{path}: torch.load(weights_only=True) failed: {_torch_reason(exc)}",
                    hint="nothing was converted",
                ) from None
        except Exception as exc:
            raise TorchwiseError(
                f"{path}: torch.load(weights_only=True) failed: {_torch_reason(exc)}",
                hint="nothing was converted",
            ) from None
        module = restricted_pickle_module(extra)
        try:
            return torch.load(path, map_location=location, weights_only=False, pickle_module=module)
        except Exception as exc:
            raise TorchwiseError(
                f"{path}: loading with the allowlisted unpickler failed: {_torch_reason(exc)}",
                hint="nothing was converted",
            ) from None


def _torch_reason(exc: Exception) -> str:
    # torch's message is a page long; the line after "WeightsUnpickler error:" is the reason.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "WeightsUnpickler error" in line:
            rest = line.split("WeightsUnpickler error:", 1)[1].strip()
            return rest or (lines[i + 1] if i + 1 < len(lines) else line)
    return lines[0] if lines else type(exc).__name__


def _tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor under ``value``, each once (an explicit stack: any depth, any sharing)."""
    import torch

    found: list[torch.Tensor] = []
    seen: set[int] = set()
    stack = [value]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            found.append(obj)
            stack.extend(vars(obj).values())
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            stack.extend(vars(obj).values())
    return found


def _attach_sources(path: Path, tensors: list[torch.Tensor]) -> bool:
    """Check torch's offsets against the zip directory; tag each storage with its bytes."""
    with path.open("rb") as raw:
        directory = read_directory(raw, path.stat().st_size)
    stored = {m.data_offset: m for m in directory.members if m.method == 0}
    for tensor in tensors:
        if tensor.device.type != "meta":
            return False
        storage = tensor.untyped_storage()
        offset = getattr(storage, "_checkpoint_offset", None)
        if offset is None and not storage.nbytes():
            continue  # saved without data (a meta tensor): nothing to stream
        member = stored.get(offset) if isinstance(offset, int) else None
        if member is None or member.size < storage.nbytes():
            return False
        setattr(storage, SOURCE, (path, offset))  # read back by the writer (parts.py)
    return True


def _safetensors(part: Container) -> Loaded:
    import torch

    with part.path.open("rb") as raw:
        (n,) = struct.unpack("<Q", raw.read(8))
        header = json.loads(raw.read(n))
    value: dict[str, Any] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = getattr(torch, _NAMES_TO_DTYPE.get(entry["dtype"], "uint8"))
        tensor = torch.empty(entry["shape"], dtype=dtype, device="meta")
        setattr(tensor.untyped_storage(), SOURCE, (part.path, 8 + n + entry["data_offsets"][0]))
        value[name] = tensor
    return Loaded(value, True, "little")
