"""The baseline's profile: where a step's time goes, its top operators, syncs and memory.

- **Phases**: data (next batch + copy to the device), forward (with the loss),
  backward, optimizer (``zero_grad`` + ``step``), each timed over a few steps
  with the device synchronised at the phase boundaries. Synchronising serialises
  a GPU step that would otherwise overlap phases, so on CUDA the split says where
  the work is, not how the pipelined step's time divides; the step time itself is
  measured without it.
- **Top operators**: ``torch.profiler`` over a few steps, self time per aten
  operator (device time on CUDA), summarised to the ones that matter.
- **Syncs**: operators that make the host wait for the device (``.item()``,
  ``nonzero``, boolean-mask indexing, ...), each with the user's line that
  issued it, recorded by a dispatch mode during one step. They are found on CPU
  too, where they cost nothing yet, because they will stall the same step on a
  GPU. On CUDA, ``torch.cuda``'s sync debug mode also counts every
  synchronisation, including copies to the host.
"""

from __future__ import annotations

import os
import sysconfig
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchwise.tune.memory import profiled
from torchwise.tune.stats import median
from torchwise.tune.step import TrainingStep, synchronize

#: aten operators that copy a device value to the host, hence block until the
#: device catches up -> what usually causes them in user code.
SYNC_OPS: dict[str, str] = {
    "_local_scalar_dense": "tensor.item(), float(t), int(t), bool(t) or `if t:`",
    "nonzero": "nonzero() or torch.where(cond) with one argument",
    "masked_select": "masked_select",
    "unique": "torch.unique (its output size depends on the data)",
    "_unique2": "torch.unique (its output size depends on the data)",
    "unique_consecutive": "torch.unique_consecutive",
    "unique_dim": "torch.unique(dim=...)",
    "equal": "torch.equal",
    "repeat_interleave": "repeat_interleave without output_size",
    "index": "indexing with a boolean mask, x[mask]",
    "index_put": "assigning through a boolean mask, x[mask] = v",
    "index_put_": "assigning through a boolean mask, x[mask] = v",
}
PHASES = ("data", "forward", "backward", "optimizer")


@dataclass(frozen=True)
class OpRow:
    name: str
    calls: int
    self_s: float
    share: float


@dataclass(frozen=True)
class SyncSite:
    op: str
    per_step: float
    cause: str
    where: list[str] = field(default_factory=list)


@dataclass
class Profile:
    #: phase -> median seconds per step
    phases: dict[str, float]
    top_ops: list[OpRow]
    syncs: list[SyncSite]
    profiled_steps: int
    time_column: str  # "self CPU" | "self CUDA"
    #: synchronisations torch.cuda's sync debug mode counted in one step (CUDA only)
    cuda_syncs: int | None = None

    @property
    def phase_total(self) -> float:
        return sum(self.phases.values())


def phase_times(step: TrainingStep, steps: int = 5) -> dict[str, float]:
    """Median seconds per phase over ``steps`` steps (the step must be warmed up)."""
    samples: dict[str, list[float]] = {phase: [] for phase in PHASES}
    device = step.device
    with step.scope():
        for _ in range(steps):
            synchronize(device)
            t0 = time.perf_counter()
            batch = step.next_batch()
            synchronize(device)
            t1 = time.perf_counter()
            step.zero_grad()
            loss = step.forward_loss(batch)
            synchronize(device)
            t2 = time.perf_counter()
            step.backward(loss)
            synchronize(device)
            t3 = time.perf_counter()
            step.optimizer_step()
            synchronize(device)
            t4 = time.perf_counter()
            for phase, seconds in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                samples[phase].append(seconds)
    return {phase: median(values) for phase, values in samples.items()}


def top_operators(step: TrainingStep, steps: int = 3, limit: int = 10) -> tuple[list[OpRow], str]:
    """(top operators by self time, the time column's name)."""
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU]
    cuda = step.device.type == "cuda"
    if cuda:
        activities.append(ProfilerActivity.CUDA)
    with step.scope(), profiled(activities) as prof:
        step.run(steps)
    rows = []
    for event in prof.key_averages():
        self_us = event.self_device_time_total if cuda else event.self_cpu_time_total
        if self_us > 0 and event.key.startswith("aten::"):
            rows.append((event.key, event.count, self_us / 1e6))
    total = sum(seconds for _, _, seconds in rows) or 1.0
    rows.sort(key=lambda row: -row[2])
    top = [
        OpRow(name, calls // steps, seconds / steps, seconds / total)
        for name, calls, seconds in rows[:limit]
    ]
    return top, "self CUDA" if cuda else "self CPU"


def _is_library(filename: str) -> bool:
    path = os.path.normcase(os.path.abspath(filename))
    return filename.startswith("<") or path.startswith(_LIBRARY_ROOTS)


_LIBRARY_ROOTS = tuple(
    os.path.normcase(os.path.abspath(root)) + os.sep
    for root in (
        os.path.dirname(torch.__file__),
        os.path.dirname(os.path.dirname(__file__)),  # torchwise itself
        sysconfig.get_paths()["stdlib"],
    )
)


_STEP_FILE = os.path.normcase(os.path.join(os.path.dirname(__file__), "step.py"))


def _issuer(stack: list[traceback.FrameSummary]) -> str:
    """``file:line`` of the user's code that issued an op, or the part of torch that did.

    Only frames inside the training step count (below torchwise's step code):
    an op issued by autograd during ``backward()`` has the caller of tune above
    it on the stack, which did not issue it.
    """
    inner = 0
    for index, frame in enumerate(stack):
        if os.path.normcase(os.path.abspath(frame.filename)) == _STEP_FILE:
            inner = index + 1
    user = [f for f in stack[inner:] if not _is_library(f.filename)]
    if user:
        return f"{user[-1].filename}:{user[-1].lineno}"
    names = " ".join(f.filename for f in stack[inner:])
    if f"{os.sep}optim{os.sep}" in names:
        return "the optimizer step"
    return "autograd (the backward of an op above)"


def _mask_index(args: tuple[Any, ...]) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(
        isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
        for i in (indices or ())
    )


class _SyncRecorder(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records every syncing op of one step with the user's line that caused it.

    An op whose first argument is optimizer state (Adam's ``step`` counter, read
    with ``.item()`` by the for-loop implementation) is skipped: that tensor stays
    on the host even on a GPU, so reading it never waits for the device.
    """

    def __init__(self, exempt: set[int]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.exempt = exempt
        self.sites: Counter[tuple[str, str]] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if name in SYNC_OPS and (
            name not in ("index", "index_put", "index_put_") or _mask_index(args)
        ):
            first = args[0] if args else None
            if not (isinstance(first, torch.Tensor) and id(first) in self.exempt):
                self.sites[(name, _issuer(traceback.extract_stack()[:-1]))] += 1
        return func(*args, **(kwargs or {}))


def sync_sites(step: TrainingStep) -> list[SyncSite]:
    """The syncing ops of one step and where they come from (see :class:`_SyncRecorder`)."""
    exempt = {
        id(value)
        for state in step.optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    }
    recorder = _SyncRecorder(exempt)
    with step.scope(), recorder:
        step.run(1)
    grouped: dict[str, SyncSite] = {}
    for (name, where), count in sorted(recorder.sites.items(), key=lambda item: -item[1]):
        site = grouped.setdefault(name, SyncSite(name, 0.0, SYNC_OPS[name], []))
        grouped[name] = SyncSite(name, site.per_step + count, site.cause, [*site.where, where])
    return list(grouped.values())


def cuda_sync_count(step: TrainingStep) -> int:
    """Synchronisations torch.cuda's sync debug mode reports in one CUDA step."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with step.scope():
                step.run(1)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def profile_step(step: TrainingStep, *, phase_steps: int = 5, profile_steps: int = 3) -> Profile:
    """The baseline profile (see the module docstring); ``step`` must be warmed up."""
    phases = phase_times(step, phase_steps)
    top, column = top_operators(step, profile_steps)
    syncs = sync_sites(step)
    cuda_syncs = cuda_sync_count(step) if step.device.type == "cuda" else None
    return Profile(phases, top, syncs, profile_steps, column, cuda_syncs)
