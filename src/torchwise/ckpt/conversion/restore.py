"""Rebuild the original checkpoint object from a file ``torchwise ckpt convert`` wrote.

``load_converted("model.safetensors")`` returns what ``torch.load`` returned for the
source: the same nesting, dict types and key types, tuples, non-tensor values, tied
tensors as one object, shared containers as one object, NumPy arrays as arrays,
Parameters with their ``requires_grad`` and every tensor's Python attributes, meta
tensors, and tensors that ``--split`` stored as parts put back together.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchwise.ckpt.conversion import parts, typedjson
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
    return decode_structure(meta["torchwise.structure"], Tensors(stored, aliases, splits))


class Tensors:
    """Placeholders -> tensors: one object per (key, Parameter, requires_grad), so tied
    tensors stay tied and an alias that wants no gradient is a view of its own."""

    def __init__(
        self, stored: dict[str, Any], aliases: dict[str, str], splits: dict[str, dict[str, Any]]
    ) -> None:
        self.stored, self.aliases, self.splits = stored, aliases, splits
        self.cache: dict[tuple[str, bool, bool], Any] = {}

    def __call__(self, node: dict[str, Any]) -> Any:
        import torch

        parameter, grad = bool(node.get("parameter")), bool(node.get("requires_grad"))
        if "$meta" in node:
            tensor: Any = parts.meta_tensor(node["$meta"])
            return _finish(torch.nn.Parameter(tensor, grad) if parameter else tensor, node)
        key = node.get("$tensor") or node["$ndarray"]
        ident = (key, parameter, grad)
        if ident not in self.cache:
            data = self._data(self.aliases.get(key, key))
            if "$ndarray" in node:
                self.cache[ident] = data.numpy()
            elif parameter:
                self.cache[ident] = _finish(torch.nn.Parameter(data, requires_grad=grad), node)
            else:
                # a new tensor object on the same data: an alias may not want gradients
                self.cache[ident] = _finish(data.detach().requires_grad_() if grad else data, node)
        return self.cache[ident]

    def _data(self, key: str) -> Any:
        if key in self.stored and key not in self.splits:
            return self.stored[key]
        pieces = {k[len(key) + 1 :]: v for k, v in self.stored.items() if k.startswith(key + ".")}
        if key in self.stored:
            pieces[""] = self.stored[key]
        info = next((self.splits[k] for k in (key, *(f"{key}.{p}" for p in pieces))
                     if k in self.splits), None)  # fmt: skip
        if info is None:
            raise TorchwiseError(f"tensor {key} is missing from the file")
        return parts.rebuild(info, pieces)


def _finish(tensor: Any, node: dict[str, Any]) -> Any:
    """Set the tensor's Python attributes back (decoded from its placeholder)."""
    for name, value in node.get("$attrs", {}).items():
        setattr(tensor, name, value)
    return tensor


def decode_structure(text: str, tensors: Tensors) -> Any:
    """The structure JSON, decoded with ``tensors`` filling the placeholders (attributes too)."""

    def fetch(node: dict[str, Any]) -> Any:
        if "attrs" in node:
            node = {**node, "$attrs": decoder.decode(node["attrs"])}
        return tensors(node)

    decoder = typedjson.Decoder(fetch)
    return decoder.decode(json.loads(text))
