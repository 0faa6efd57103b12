"""The tensors inside nested values: a model's inputs and outputs, a batch.

One walker for every capability that runs a model (doctor, tune, doc). The
rule: a value is walked as torch's pytree walks it (tuples, lists, dicts,
namedtuples, OrderedDicts, and every container a library registers, such as
transformers' ``ModelOutput``, each rebuilt as its own type by
:func:`map_tensors`), and beyond pytree, any other ``Mapping`` (a tokenizer's
``BatchEncoding``) is walked by its values and rebuilt as a ``dict``, and a
dataclass instance pytree does not know is searched by :func:`tensors_in`
through its fields (left as it is by :func:`map_tensors`). Everything else is
a leaf. Plain tuples, lists and dicts take a fast path: the walk runs on every
training step of ``tune``'s timed loops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils import _pytree as pytree


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``value`` with ``fn`` applied to every tensor inside it (see the module docstring)."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    kind = type(value)
    if kind is tuple:
        return tuple(map_tensors(item, fn) for item in value)
    if kind is list:
        return [map_tensors(item, fn) for item in value]
    if kind is dict:
        return {key: map_tensors(item, fn) for key, item in value.items()}
    if not pytree.tree_is_leaf(value):
        children, spec = pytree.tree_flatten(value)
        return pytree.tree_unflatten([map_tensors(child, fn) for child in children], spec)
    if isinstance(value, Mapping):
        return {key: map_tensors(item, fn) for key, item in value.items()}
    return value


def tensors_in(value: Any) -> list[torch.Tensor]:
    """Every tensor inside ``value``, in the order :func:`map_tensors` visits them,
    and those in the fields of dataclass instances."""
    found: list[torch.Tensor] = []
    _collect(value, found)
    return found


def _collect(value: Any, found: list[torch.Tensor]) -> None:
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif type(value) in (tuple, list):
        for item in value:
            _collect(item, found)
    elif type(value) is dict:
        for item in value.values():
            _collect(item, found)
    elif not pytree.tree_is_leaf(value):
        for child in pytree.tree_leaves(value):
            _collect(child, found)
    elif isinstance(value, Mapping):
        for item in value.values():
            _collect(item, found)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _collect(getattr(value, field.name), found)
