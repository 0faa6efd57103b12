"""Forward's output as the tests reach it: one accessor per tensor, and its contract.

The output is walked in the order ``torchwise doc`` flattens it (tensors,
named tuples, tuples and lists, dicts, dataclasses), so the i-th tensor here is
the i-th the doc fitted. A Hugging Face ``ModelOutput`` is read by attribute
(``out.logits``), a plain dict by key. Each doc formula must give this forward's
shape at the tests' default sizes; a formula that does not is dropped, never
trusted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError
from torchwise.testgen.contract import Contract, evaluate_dim
from torchwise.testgen.render import OutputLeaf

if TYPE_CHECKING:
    import torch

    from torchwise.testgen.render import Plan

#: More outputs than this (a cache of every layer's keys and values) are not all asserted.
MAX_OUTPUTS = 8


def tensors_of(value: Any, accessor: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """(accessor, tensor) for every tensor in ``value``, in the doc's flattening order."""
    import torch

    if isinstance(value, torch.Tensor):
        yield accessor, value
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        for name in value._fields:
            yield from tensors_of(getattr(value, name), f"{accessor}.{name}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from tensors_of(item, f"{accessor}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from tensors_of(item, accessor + _key(value, key, item))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for fld in dataclasses.fields(value):
            yield from tensors_of(getattr(value, fld.name), f"{accessor}.{fld.name}")


def _key(mapping: dict[Any, Any], key: Any, item: Any) -> str:
    """``.logits`` where the dict is also an object with that attribute, else ``["key"]``."""
    if isinstance(key, str) and key.isidentifier() and getattr(mapping, key, None) is item:
        return f".{key}"
    if isinstance(key, str) and '"' not in key and "\\" not in key:
        return f'["{key}"]'
    return f"[{key!r}]"


def output_leaves(out: Any, contract: Contract, plan: Plan, notes: list[str]) -> list[OutputLeaf]:
    """The output tensors the tests check, with the doc's formulas where they hold."""
    found = list(tensors_of(out))
    if not found:
        raise TorchwiseError(
            f"{plan.title}'s forward returns no tensor ({type(out).__name__}); there is no "
            "output to test"
        )
    aligned = len(contract.outputs) == len(found) and all(
        len(o.dims) == t.dim() for o, (_, t) in zip(contract.outputs, found, strict=True)
    )
    if contract.outputs and not aligned:
        notes.append(
            "the doc's measured outputs do not line up with this forward's; the "
            "shape test checks the default sizes only"
        )
    defaults = {s.var: s.default for s in contract.symbols}
    leaves = []
    for index, (accessor, tensor) in enumerate(found[:MAX_OUTPUTS]):
        dims: list[str | None] = [None] * tensor.dim()
        if aligned:
            for j, formula in enumerate(contract.outputs[index].dims):
                if formula is not None and evaluate_dim(formula, defaults) == tensor.shape[j]:
                    dims[j] = formula
                elif formula is not None:
                    notes.append(
                        f"output{accessor} dim {j}: the doc's {formula} does not give "
                        f"{tensor.shape[j]} at the default sizes; not checked"
                    )
        sizes = tuple(int(s) for s in tensor.shape)
        leaves.append(OutputLeaf(accessor, tuple(dims), sizes, tensor.is_floating_point()))
    if len(found) > MAX_OUTPUTS:
        notes.append(
            f"forward returns {len(found)} tensors; the tests check the first {MAX_OUTPUTS}"
        )
    return leaves
