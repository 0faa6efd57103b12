"""Rebuild the original checkpoint object from a file ``torchwise ckpt convert`` wrote.

``load_converted("model.safetensors")`` returns what ``torch.load`` returned for the
source: the same nesting, dict types and key types, tuples, non-tensor values, tied
tensors as one object, NumPy arrays as arrays, and tensors that ``--split`` stored
as parts put back together (complex, quantized, sparse).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchwise.ckpt.conversion import typedjson
from torchwise.errors import TorchwiseError


def load_converted(path: str | Path) -> Any:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        meta = dict(handle.metadata() or {})
        if "torchwise.structure" not in meta:
            raise TorchwiseError(f"{path} was not written by torchwise ckpt convert")
        stored = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    aliases: dict[str, str] = json.loads(meta.get("torchwise.aliases", "{}"))
    splits: dict[str, dict[str, Any]] = json.loads(meta.get("torchwise.split", "{}"))
    cache: dict[tuple[str, bool, bool], Any] = {}

    def fetch(kind: str, key: str, parameter: bool, requires_grad: bool) -> Any:
        import torch

        ident = (key, parameter, requires_grad)
        if ident not in cache:
            stored_key = aliases.get(key, key)
            whole = stored_key in stored and stored_key not in splits
            tensor = stored[stored_key] if whole else _rebuild(stored_key, stored, splits)
            if kind == "ndarray":
                cache[ident] = tensor.numpy()
            elif parameter:
                cache[ident] = torch.nn.Parameter(tensor, requires_grad=requires_grad)
            else:
                # a new tensor object on the same data: an alias may not want gradients
                cache[ident] = tensor.detach().requires_grad_() if requires_grad else tensor
        return cache[ident]

    return typedjson.decode(json.loads(meta["torchwise.structure"]), fetch)


def _rebuild(key: str, stored: dict[str, Any], splits: dict[str, dict[str, Any]]) -> Any:
    import torch

    parts = {k[len(key) + 1 :]: v for k, v in stored.items() if k.startswith(key + ".")}
    info = next((splits[k] for k in (key, *(f"{key}.{p}" for p in parts)) if k in splits), None)
    if info is None:
        raise TorchwiseError(f"tensor {key} is missing from the file")
    dtype = getattr(torch, info["dtype"])
    note, shape = info["note"], info["shape"]
    if note.startswith("quantized per tensor"):
        return torch._make_per_tensor_quantized_tensor(
            parts["int_repr"], info["scale"], info["zero_point"]
        )
    if note.startswith("quantized per channel"):
        return torch._make_per_channel_quantized_tensor(
            parts["int_repr"], parts["scales"], parts["zero_points"], info["axis"]
        )
    if note.startswith("sparse COO"):
        return torch.sparse_coo_tensor(parts["indices"], parts["values"], shape).coalesce()
    if "tensor:" in note:  # compressed sparse layouts
        layout = getattr(torch, note.split(" tensor:")[0])
        return torch.sparse_compressed_tensor(
            parts["compressed_indices"], parts["plain_indices"], parts["values"], shape,
            layout=layout,
        )  # fmt: skip
    whole = stored[key]
    if "view_as_real" in note:
        return torch.view_as_complex(whole).to(dtype)
    return whole.view(dtype).reshape(shape)
