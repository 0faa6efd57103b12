"""The batch doctor runs on: the same from the CLI, the project audit and the MCP server.

A target's *default* inputs (the hub's and the zoo's, an inferred one) describe a
single sample at a modest length (``batch=1``, ``seq=32``). doctor needs more than
one sample (batch-independence compares samples, BatchNorm needs several in train
mode) and a short sequence keeps overfit-batch fast, so a dim named ``batch`` grows
to at least 4 and one named ``seq`` shrinks to at most 32 (:data:`DOCTOR_SIZES`).
Inputs the user described (``--input``) or a function returned are used as they
are. Every front end calls :func:`doctor_batch` (or :func:`doctor_inputs` for specs
it made itself), so they all feed doctor the same tensors for the same seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torchwise.inputs import InputSpec, make_inputs

if TYPE_CHECKING:
    from torchwise.target import ResolvedTarget

#: Named dims resized in default inputs: at least this many samples, at most this
#: many positions.
DOCTOR_SIZES = {"batch": 4, "seq": 32}


def _sized(name: str, size: int) -> int:
    if name == "batch":
        return max(size, DOCTOR_SIZES["batch"])
    if name == "seq":
        return min(size, DOCTOR_SIZES["seq"])
    return size


def doctor_sizes(specs: Sequence[InputSpec]) -> dict[str, int]:
    """Sizes for the named dims of ``specs``: a batch of at least 4, a sequence of at most
    32 (the first size a name has decides)."""
    sizes: dict[str, int] = {}
    for spec in specs:
        for leaf in spec.tensors():
            for dim in leaf.dims:
                if dim.name in DOCTOR_SIZES and dim.name not in sizes:
                    sizes[dim.name] = _sized(dim.name, dim.size)
    return sizes


def at_doctor_sizes(spec: InputSpec) -> InputSpec:
    """``spec`` with its named dims at :data:`DOCTOR_SIZES` (what :func:`doctor_inputs`
    draws), for reports that print the spec doctor ran on."""
    import dataclasses

    from torchwise.inputs import Dim

    if spec.kind == "tensor":
        dims = tuple(Dim(_sized(d.name, d.size) if d.name else d.size, d.name) for d in spec.dims)
        return dataclasses.replace(spec, dims=dims)
    if spec.children is not None:
        children = {key: at_doctor_sizes(child) for key, child in spec.children.items()}
        return dataclasses.replace(spec, children=children)
    if spec.items is not None:
        return dataclasses.replace(spec, items=tuple(at_doctor_sizes(i) for i in spec.items))
    return spec


def doctor_inputs(
    specs: Sequence[InputSpec], *, device: str = "cpu", seed: int = 0
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Default specs materialised at doctor's sizes, drawn from ``seed``."""
    return make_inputs(specs, device=device, sizes=doctor_sizes(specs), seed=seed)


def doctor_batch(
    resolved: ResolvedTarget, *, inputs_given: bool, device: str = "cpu", seed: int = 0
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The inputs doctor runs ``resolved.model`` on.

    ``inputs_given``: the user described them (``--input``), so their sizes stand.
    Inputs a factory returned (``returns_example``, ``--inputs-from``, specs with no
    tensor to draw) are the resolved ones.
    """
    specs = resolved.input_specs
    drawn = [spec for spec in specs if spec.tensors()]
    if not drawn or _from_values(resolved):
        return resolved.args, resolved.kwargs
    if inputs_given:
        return make_inputs(specs, device=device, seed=seed)
    return doctor_inputs(specs, device=device, seed=seed)


def _from_values(resolved: ResolvedTarget) -> bool:
    """Whether the inputs are values a function returned, not drawn from specs."""
    return resolved.returns_example or resolved.inputs_from is not None
