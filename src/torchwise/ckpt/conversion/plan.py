"""What a conversion will write: tensors with where their bytes come from, and the structure.

The checkpoint is loaded by torch itself, ``torch.load(weights_only=True)``, but
with ``map_location="meta"`` when it is a torch zip: torch rebuilds the whole
object (dicts, tuples, tied tensors, dtypes, strides) without reading one byte
of tensor data, and records where each storage's bytes are in the file
(``_checkpoint_offset``). Those bytes are then streamed one tensor at a time
(:mod:`torchwise.ckpt.conversion.stwriter`), so memory stays near the largest tensor
instead of the whole checkpoint. Other formats, and files with quantized or
sparse tensors, are loaded whole (and say so).

Every tensor becomes an :class:`Item`: written as is, written as its parts
(``--split``: complex128 as real/imaginary pairs, quantized as integers plus
scales, sparse as indices plus values), an alias of another item, or refused.
Everything else goes into the typed JSON structure (:mod:`.typedjson`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.ckpt.conversion import typedjson
from torchwise.errors import TorchwiseError

if TYPE_CHECKING:
    import torch

#: dtypes safetensors stores (safetensors.torch's table, as of 0.6)
SAFETENSORS_NAMES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
    "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e4m3fnuz": "F8_E4M3FNUZ",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "complex64": "C64", "uint64": "U64", "uint32": "U32",
    "uint16": "U16",
}  # fmt: skip


#: the attribute the loader sets on a storage whose bytes are streamed: (file, offset)
_SOURCE = "_torchwise_source"


@dataclass
class Item:
    """One entry of the output file."""

    key: str
    #: the tensor as torch rebuilt it (on the meta device when its bytes are streamed)
    tensor: torch.Tensor
    #: (file, offset of its storage's bytes) when streamed, else None (``tensor`` holds them)
    source: tuple[Path, int] | None = None
    #: how it is stored when it is a part of a split tensor (``complex128 as real``, ...)
    note: str | None = None


@dataclass
class Section:
    """One output file's worth: items, aliases and the structure around them."""

    items: list[Item] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    structure: Any = None
    #: part key -> what it takes to rebuild the tensor it is a part of (--split)
    split: dict[str, dict[str, Any]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    made_contiguous: list[str] = field(default_factory=list)
    copied_views: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


@dataclass
class Loaded:
    value: Any
    #: True when tensors are on the meta device and their bytes are read from the file
    streamed: bool
    byteorder: str = "little"
    notes: list[str] = field(default_factory=list)


def flatten(value: Any, prefix: str, split: bool, drop: bool, streamed: bool) -> Section:
    """Walk ``value``: tensors and arrays become items, the rest typed JSON."""
    import numpy as np
    import torch

    section = Section()
    views: dict[tuple[Any, ...], str] = {}
    storages: set[Any] = set()
    by_object: dict[int, str] = {}

    def key_for(key: str) -> str:
        taken = {i.key for i in section.items} | set(section.aliases)
        candidate, n = key or "<root>", 2
        while candidate in taken:
            candidate, n = f"{key}#{n}", n + 1
        return candidate

    def leaf(obj: Any, key: str) -> dict[str, str] | None:
        if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufc":
            name = key_for(key)
            section.items.append(Item(name, torch.from_numpy(np.ascontiguousarray(obj))))
            return {"$ndarray": name}
        if not isinstance(obj, torch.Tensor):
            return None
        flags = _tensor_flags(obj)
        if id(obj) in by_object:  # the same tensor object again (the pickle's memo)
            section.aliases[key_for(key)] = by_object[id(obj)]
            return {"$tensor": by_object[id(obj)], **flags}
        name = key_for(key)
        by_object[id(obj)] = name
        _add_tensor(section, obj.detach(), name, split, streamed, views, storages)
        return {"$tensor": name, **flags}

    dropped: list[str] | None = [] if drop else None
    try:
        section.structure = typedjson.encode(value, prefix, leaf, dropped)
    except typedjson.Unrepresentable as exc:
        raise TorchwiseError(
            f"{exc.key or 'the checkpoint'} is a {exc.type_name}, which has no JSON form",
            hint="pass --drop-non-tensor to leave such values out (they are listed)",
        ) from None
    section.dropped = dropped or []
    section.extras = _extras(section.structure)
    if section.refused:
        raise TorchwiseError(
            f"safetensors cannot hold {', '.join(section.refused[:4])}"
            + (f" and {len(section.refused) - 4} more" if len(section.refused) > 4 else ""),
            hint="pass --split to store them as their parts (real and imaginary, integers and "
            "scales, indices and values), with a note saying how to rebuild them",
        )
    return section


def _add_tensor(
    section: Section,
    tensor: torch.Tensor,
    key: str,
    split: bool,
    streamed: bool,
    views: dict[tuple[Any, ...], str],
    storages: set[Any],
) -> None:
    kind = _unsupported(tensor)
    if kind is not None:
        if not split:
            section.refused.append(f"{key} ({kind})")
            return
        for part, note in _split(tensor, kind):
            name = f"{key}.{part}" if part else key
            section.items.append(Item(name, part_tensor(note, tensor)))
            section.split[name] = split_note(tensor, note)
        return
    storage = _storage_id(tensor, streamed)
    ident = (storage, tensor.storage_offset(), tuple(tensor.shape), tensor.stride(), tensor.dtype)
    if tensor.numel() and ident in views:
        section.aliases[key] = views[ident]
        return
    views[ident] = key
    if tensor.numel() and storage in storages:
        section.copied_views.append(key)  # another view of a storage already written
    storages.add(storage)
    if not tensor.is_contiguous():
        section.made_contiguous.append(key)
    section.items.append(Item(key, tensor, getattr(tensor.untyped_storage(), _SOURCE, None)))


def _tensor_flags(tensor: torch.Tensor) -> dict[str, Any]:
    """What a tensor is beyond its data: a Parameter, gradients required."""
    import torch

    flags: dict[str, Any] = {}
    if isinstance(tensor, torch.nn.Parameter):
        flags["parameter"] = True
    if tensor.requires_grad:
        flags["requires_grad"] = True
    return flags


def _storage_id(tensor: torch.Tensor, streamed: bool) -> Any:
    storage = tensor.untyped_storage()
    source = getattr(storage, _SOURCE, None)
    if source is not None:  # meta storages are rebuilt per reference: their bytes identify them
        return ("file", *source)
    return ("memory", storage.data_ptr() or id(storage))


def _unsupported(tensor: torch.Tensor) -> str | None:
    import torch

    if tensor.is_quantized:
        return f"quantized {str(tensor.dtype).removeprefix('torch.')}"
    if tensor.layout != torch.strided:
        return f"{str(tensor.layout).removeprefix('torch.')} tensor"
    if tensor.is_nested:
        return "nested tensor"
    if tensor.is_meta and getattr(tensor.untyped_storage(), _SOURCE, None) is None:
        return "meta tensor (saved without data)"
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in SAFETENSORS_NAMES:
        return dtype
    return None


def _split(tensor: torch.Tensor, kind: str) -> list[tuple[str, str]]:
    """(suffix, note) for each part a tensor safetensors cannot hold is stored as."""
    if kind.startswith("quantized"):
        if str(tensor.qscheme()).endswith(("per_tensor_affine", "per_tensor_symmetric")):
            return [("int_repr", "quantized per tensor: int_repr; scale and zero_point in note")]
        return [("int_repr", "quantized per channel: int_repr"), ("scales", "per-channel scales"),
                ("zero_points", "per-channel zero points")]  # fmt: skip
    if kind == "sparse_coo tensor":
        return [("indices", "sparse COO indices"), ("values", "sparse COO values")]
    if kind.endswith(("csr tensor", "csc tensor", "bsr tensor", "bsc tensor")):
        return [
            ("compressed_indices", f"{kind}: compressed indices"),
            ("plain_indices", f"{kind}: plain indices"),
            ("values", f"{kind}: values"),
        ]
    if kind.startswith("complex"):
        return [("", f"{kind} stored as torch.view_as_real (last dimension: real, imaginary)")]
    return [("", f"{kind} stored as its raw bytes (uint8); view it back as {kind}")]


def part_tensor(note: str, tensor: torch.Tensor) -> torch.Tensor:
    """The tensor stored for one part of a split tensor (see :func:`_split`)."""
    import torch

    if note.startswith("quantized per tensor"):
        return tensor.int_repr()
    if note.startswith("quantized per channel"):
        return tensor.int_repr()
    if note == "per-channel scales":
        return tensor.q_per_channel_scales()
    if note == "per-channel zero points":
        return tensor.q_per_channel_zero_points()
    if note.startswith("sparse COO indices"):
        return tensor.coalesce().indices()
    if note.startswith("sparse COO values"):
        return tensor.coalesce().values()
    if note.endswith("compressed indices"):
        row = tensor.layout in (torch.sparse_csr, torch.sparse_bsr)
        return tensor.crow_indices() if row else tensor.ccol_indices()
    if note.endswith("plain indices"):
        row = tensor.layout in (torch.sparse_csr, torch.sparse_bsr)
        return tensor.col_indices() if row else tensor.row_indices()
    if note.endswith(": values"):
        return tensor.values()
    if "view_as_real" in note:
        return torch.view_as_real(tensor.contiguous())
    return tensor.contiguous().view(torch.uint8)


def split_note(tensor: torch.Tensor, note: str) -> dict[str, Any]:
    """What it takes to rebuild a split tensor, beyond its parts."""
    import torch

    info: dict[str, Any] = {"note": note, "dtype": str(tensor.dtype).removeprefix("torch."),
                            "shape": list(tensor.shape)}  # fmt: skip
    if tensor.is_quantized and tensor.qscheme() in (torch.per_tensor_affine,
                                                    torch.per_tensor_symmetric):  # fmt: skip
        info.update(scale=tensor.q_scale(), zero_point=tensor.q_zero_point())
    elif tensor.is_quantized:
        info.update(axis=tensor.q_per_channel_axis())
    return info


def _extras(structure: Any) -> list[str]:
    """Top-level non-tensor entries, for the summary line."""
    if not isinstance(structure, dict):
        return []
    return [k for k, v in structure.items() if not (isinstance(v, dict) and
            ("$tensor" in v or "$ndarray" in v))][:20]  # fmt: skip


def metadata(section: Section, source: Path) -> dict[str, str]:
    return {
        "format": "pt",
        "torchwise.source": source.name,
        "torchwise.structure": json.dumps(section.structure, allow_nan=False),
        "torchwise.aliases": json.dumps(section.aliases),
        "torchwise.split": json.dumps(section.split),
        "torchwise.dropped": json.dumps(section.dropped),
    }
