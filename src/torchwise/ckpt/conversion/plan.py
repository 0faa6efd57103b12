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
(``--split``, :mod:`.parts`), an alias of another item, or refused. A tensor's
Python attributes (``tensor.note = ...``, a Parameter's) go into its placeholder in
the structure; a tensor subclass other than Parameter is refused (its class is not
kept). Everything else goes into the typed JSON structure (:mod:`.typedjson`),
shared references as references.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.ckpt.conversion import parts, typedjson
from torchwise.ckpt.conversion.parts import SAFETENSORS_NAMES, SOURCE
from torchwise.errors import TorchwiseError

if TYPE_CHECKING:
    import torch

__all__ = ["SAFETENSORS_NAMES", "Item", "Loaded", "Section", "flatten", "metadata"]


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
    #: id(tensor or array in the loaded object) -> the key its placeholder names
    keys: dict[int, str] = field(default_factory=dict)
    #: the loaded object this section writes (the read-back check holds the file to it)
    value: Any = None


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

    section = Section(value=value)
    views: dict[tuple[Any, ...], str] = {}
    storages: set[Any] = set()
    taken: set[str] = set()

    def key_for(key: str) -> str:
        candidate, n = key or "<root>", 2
        while candidate in taken:
            candidate, n = f"{key}#{n}", n + 1
        taken.add(candidate)
        return candidate

    def leaf(obj: Any, key: str) -> dict[str, Any] | None:
        if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufc":
            if id(obj) not in section.keys:
                section.keys[id(obj)] = name = key_for(key)
                section.items.append(Item(name, torch.from_numpy(np.ascontiguousarray(obj))))
            return {"$ndarray": section.keys[id(obj)]}
        if not isinstance(obj, torch.Tensor):
            return None
        if type(obj) not in (torch.Tensor, torch.nn.Parameter):
            raise typedjson.Unrepresentable(key, obj, " (a tensor subclass: its class is not kept)")
        flags = _tensor_flags(obj, key, encoder)
        if id(obj) in section.keys:  # the same tensor object again (the pickle's memo)
            section.aliases[key_for(key)] = section.keys[id(obj)]
            return {"$tensor": section.keys[id(obj)], **flags}
        kind = parts.unsupported(obj)
        if kind is not None and kind.startswith("meta") and split:
            section.keys[id(obj)] = key_for(key)
            return {"$meta": parts.meta_record(obj), **flags}
        name = section.keys[id(obj)] = key_for(key)
        _add_tensor(section, obj.detach(), name, kind, split, streamed, views, storages)
        return {"$tensor": name, **flags}

    dropped: list[str] | None = [] if drop else None
    encoder = typedjson.Encoder(leaf, dropped)
    try:
        section.structure = encoder.encode(value, prefix)
    except typedjson.Unrepresentable as exc:
        raise TorchwiseError(
            f"{exc.key or 'the checkpoint'} is a {exc.type_name}{exc.why}, which has no JSON form",
            hint="pass --drop-non-tensor to leave such values out (they are listed)",
        ) from None
    except typedjson.TooDeep as exc:
        where = str(exc) if len(str(exc)) < 60 else str(exc)[:57] + "..."
        raise TorchwiseError(
            f"{where or 'the checkpoint'} nests more than {typedjson.MAX_DEPTH} levels deep, more "
            "than convert writes as JSON",
            hint="nothing was converted; keep this checkpoint in torch.save's format",
        ) from None
    section.dropped = dropped or []
    section.extras = _extras(section.structure)
    if section.refused:
        raise TorchwiseError(
            f"safetensors cannot hold {', '.join(section.refused[:4])}"
            + (f" and {len(section.refused) - 4} more" if len(section.refused) > 4 else ""),
            hint="pass --split to store them as their parts (real and imaginary, integers and "
            "scales, indices and values, the components of a nested tensor), with a note "
            "saying how to rebuild them",
        )
    return section


def _add_tensor(
    section: Section,
    tensor: torch.Tensor,
    key: str,
    kind: str | None,
    split: bool,
    streamed: bool,
    views: dict[tuple[Any, ...], str],
    storages: set[Any],
) -> None:
    if kind is not None:
        if not split:
            section.refused.append(f"{key} ({kind})")
            return
        try:
            pieces, info = parts.split(tensor, kind)
        except parts.CannotSplit as exc:
            section.refused.append(f"{key} ({exc}, even with --split)")
            return
        for suffix, piece in pieces:
            name = f"{key}.{suffix}" if suffix else key
            section.items.append(Item(name, piece))
            section.split[name] = info
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
    section.items.append(Item(key, tensor, getattr(tensor.untyped_storage(), SOURCE, None)))


def _tensor_flags(tensor: torch.Tensor, key: str, encoder: typedjson.Encoder) -> dict[str, Any]:
    """What a tensor is beyond its data: a Parameter, gradients required, its attributes."""
    import torch

    flags: dict[str, Any] = {}
    if isinstance(tensor, torch.nn.Parameter):
        flags["parameter"] = True
    if tensor.requires_grad:
        flags["requires_grad"] = True
    attrs = vars(tensor)
    if attrs:
        flags["attrs"] = encoder.encode(attrs, f"{key}.<attributes>")
    return flags


def _storage_id(tensor: torch.Tensor, streamed: bool) -> Any:
    storage = tensor.untyped_storage()
    source = getattr(storage, SOURCE, None)
    if source is not None:  # meta storages are rebuilt per reference: their bytes identify them
        return ("file", *source)
    return ("memory", storage.data_ptr() or id(storage))


def _extras(structure: Any) -> list[str]:
    """Top-level non-tensor entries, for the summary line."""
    if not isinstance(structure, dict):
        return []
    return [k for k, v in structure.items() if not (isinstance(v, dict) and
            ("$tensor" in v or "$ndarray" in v or "$meta" in v))][:20]  # fmt: skip


def metadata(section: Section, source: Path) -> dict[str, str]:
    return {
        "format": "pt",
        "torchwise.source": source.name,
        "torchwise.structure": json.dumps(section.structure, allow_nan=False),
        "torchwise.aliases": json.dumps(section.aliases),
        "torchwise.split": json.dumps(section.split),
        "torchwise.dropped": json.dumps(section.dropped),
    }
