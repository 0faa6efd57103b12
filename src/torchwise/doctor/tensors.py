"""Walking the tensors inside nested inputs and outputs (tuples, lists, dicts, HF outputs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """Apply ``fn`` to every tensor inside nested tuples, lists and dicts."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(map_tensors(o, fn) for o in obj)
    if isinstance(obj, list):
        return [map_tensors(o, fn) for o in obj]
    if isinstance(obj, Mapping):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    return obj


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """Every tensor inside ``obj`` in a stable order (also HF-style output objects)."""
    found: list[torch.Tensor] = []
    if isinstance(obj, torch.Tensor):
        found.append(obj)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            found.extend(tensors_in(o))
    elif isinstance(obj, Mapping):
        for v in obj.values():
            found.extend(tensors_in(v))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            found.extend(tensors_in(getattr(obj, f.name)))
    return found
