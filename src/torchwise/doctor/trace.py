"""Record what every submodule received and returned, to say *where* a problem starts.

Forward hooks fire when a module finishes, so records come innermost-first in
execution order. The first record whose output shows a problem (a difference
between two runs, a non-finite value) names the culprit: if that module's inputs
were still clean, the module itself did it; if its inputs were already bad, the
problem came from plain code in the parent's forward just before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from torchwise.doctor.context import tensors_in


@dataclass
class Record:
    name: str
    kind: str
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


@dataclass
class Trace:
    records: list[Record] = field(default_factory=list)


def _snap(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    # clone: in-place ops later in forward (ReLU(inplace=True)) would rewrite them
    return [t.detach().clone() for t in tensors if t.is_floating_point() or t.is_complex()]


@contextmanager
def recording(model: nn.Module, *, keep_inputs: bool = True) -> Iterator[Trace]:
    """Record the floating-point inputs and outputs of every submodule call."""
    trace = Trace()
    handles = []
    for name, module in model.named_modules():
        label = name or type(module).__name__

        def hook(mod: nn.Module, args: object, out: object, label: str = label) -> None:
            ins = _snap(tensors_in(args)) if keep_inputs else []
            trace.records.append(Record(label, type(mod).__name__, ins, _snap(tensors_in(out))))

        handles.append(module.register_forward_hook(hook))
    try:
        yield trace
    finally:
        for handle in handles:
            handle.remove()


Region = Callable[[torch.Tensor], torch.Tensor | None]


def _differs(a: list[torch.Tensor], b: list[torch.Tensor], region: Region) -> bool:
    for x, y in zip(a, b, strict=False):
        if x.shape != y.shape:
            return True
        rx, ry = region(x), region(y)
        if rx is None or ry is None:
            continue
        if not torch.allclose(rx, ry, rtol=1e-5, atol=1e-6, equal_nan=True):
            return True
    return len(a) != len(b)


Blame = tuple[str, str]  # (module name for "where", a sentence saying what happened)


def first_divergence(a: Trace, b: Trace, region: Region) -> Blame | None:
    """Where two runs first differ inside ``region``; None if nowhere."""
    previous = None
    for ra, rb in zip(a.records, b.records, strict=False):
        if ra.name != rb.name:
            return ra.name, f"the two runs took different paths at `{ra.name}` / `{rb.name}`"
        if _differs(ra.outputs, rb.outputs, region):
            return _blame(ra.name, ra.kind, _differs(ra.inputs, rb.inputs, region), previous)
        previous = ra.name
    return None


def first_nonfinite(trace: Trace) -> Blame | None:
    """The first submodule that returned NaN or inf; None if none."""
    previous = None
    for rec in trace.records:
        if any(not bool(torch.isfinite(t).all()) for t in rec.outputs):
            bad_in = any(not bool(torch.isfinite(t).all()) for t in rec.inputs)
            return _blame(rec.name, rec.kind, bad_in, previous)
        previous = rec.name
    return None


def _blame(name: str, kind: str, inputs_bad: bool, previous: str | None) -> Blame:
    if not inputs_bad:
        return name, f"`{name}` ({kind}) is the first module whose output shows it"
    parent = name.rsplit(".", 1)[0] if "." in name else ""
    where = f"`{parent}`.forward()" if parent else "the model's forward()"
    after = f" after `{previous}`" if previous else ""
    return (
        parent or "forward",
        f"`{name}` ({kind}) already receives it, so it comes from plain tensor code in {where}"
        f"{after} and before `{name}`",
    )
