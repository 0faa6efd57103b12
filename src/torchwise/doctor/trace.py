"""Record what every submodule received and returned, to say *where* a problem starts.

Forward hooks fire when a module finishes, so records come innermost-first in
execution order. The first record whose output shows a problem (a difference
between two runs, a non-finite value) names the culprit: if that module's inputs
were still clean, the module itself did it; if its inputs were already bad, the
problem came from plain code in the parent's forward just before it.
"""

from __future__ import annotations

import sysconfig
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from torchwise.hooks import ModuleCall, module_calls
from torchwise.tensortree import tensors_in


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


_STDLIB = (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
_TORCHWISE = str(Path(__file__).resolve().parents[1])
_TORCH = str(Path(torch.__file__).resolve().parent)


def frame_owner(filename: str) -> str:
    """Whose code a frame runs: ``"user"``, ``"torch"``, ``"library"`` (an installed
    package) or ``"internal"`` (torchwise, the standard library, synthetic frames)."""
    if filename.startswith("<") or filename.startswith(_TORCHWISE):
        return "internal"
    if filename.startswith(_TORCH):
        return "torch"
    # before the standard library: in a venv, platstdlib is a prefix of site-packages
    if "site-packages" in Path(filename).parts or "dist-packages" in Path(filename).parts:
        return "library"
    if filename.startswith(_STDLIB):
        return "internal"
    return "user"


def short_location(frame: traceback.FrameSummary) -> str:
    """``model.py:42`` (``transformers/models/gpt2/modeling_gpt2.py:312`` for libraries)."""
    parts = Path(frame.filename).parts
    for anchor in ("site-packages", "dist-packages"):
        if anchor in parts:
            return f"{'/'.join(parts[parts.index(anchor) + 1 :])}:{frame.lineno}"
    if frame.filename.startswith(_TORCH):
        return f"torch/{Path(frame.filename).relative_to(_TORCH)}:{frame.lineno}"
    return f"{Path(frame.filename).name}:{frame.lineno}"


def model_code_frame(frames: Iterable[traceback.FrameSummary]) -> traceback.FrameSummary | None:
    """The innermost frame of the model's code among ``frames`` (outermost first).

    Only frames below torchwise's own last frame count (the model runs inside a
    check, so frames above it are the caller's script or pytest). The user's own code
    wins; an installed library (transformers) comes next; None when only torch runs.
    """
    frames = list(frames)
    while frames and frames[-1].filename.startswith(_TORCHWISE):
        frames.pop()  # a dispatch mode or hook of torchwise's own, watching from inside
    last_ours = max((i for i, f in enumerate(frames) if f.filename.startswith(_TORCHWISE)),
                    default=-1)  # fmt: skip
    inner = frames[last_ours + 1 :]
    for owner in ("user", "library"):
        found = [f for f in inner if frame_owner(f.filename) == owner]
        if found:
            return found[-1]
    return None


def innermost_user_frame(frames: Iterable[traceback.FrameSummary]) -> str | None:
    """``model.py:42`` for :func:`model_code_frame`, or None."""
    frame = model_code_frame(frames)
    return None if frame is None else short_location(frame)


def module_in_traceback(exc: BaseException, model: nn.Module) -> str | None:
    """The innermost submodule of ``model`` whose code was running when ``exc`` was raised.

    Read from the traceback's frames (a ``self`` that is one of the model's
    submodules), so no hooks are needed; None when only the model's own forward ran.
    """
    names = {id(m): n for n, m in model.named_modules() if n}
    found = None
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if owner is not None and id(owner) in names:
            found = names[id(owner)]
        tb = tb.tb_next
    return found


@contextmanager
def call_order(model: nn.Module) -> Iterator[list[str]]:
    """The names of the submodules forward calls, in the order of their first call."""
    order: list[str] = []
    seen: set[str] = set()

    def entered(call: ModuleCall) -> None:
        if call.name not in seen:
            seen.add(call.name)
            order.append(call.name)

    with module_calls(model, on_enter=entered):
        yield order


@contextmanager
def recording(model: nn.Module) -> Iterator[Trace]:
    """Record the floating-point inputs and outputs of every submodule call."""
    trace = Trace()

    def returned(call: ModuleCall, output: object) -> None:
        label = call.name or type(call.module).__name__
        inputs = _snap(tensors_in((call.args, call.kwargs)))
        trace.records.append(Record(label, type(call.module).__name__, inputs,
                                    _snap(tensors_in(output))))  # fmt: skip

    with module_calls(model, on_exit=returned):
        yield trace


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
