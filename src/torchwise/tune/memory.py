"""Peak memory of a training step, as the device's allocator sees it.

- **CUDA**: the caching allocator's own counters: ``memory_allocated`` before the
  step (weights, gradients, optimizer state, the batch) and
  ``max_memory_allocated`` during it, after ``reset_peak_memory_stats``;
  ``max_memory_reserved`` is what the allocator held from the driver.
- **CPU**: PyTorch's CPU allocator reports every allocation and free to the
  profiler when ``profile_memory=True``; replaying those ``[memory]`` events in
  order gives the peak of live tensor bytes during the step, above what was
  live when it started (``resident``: counted from the parameters, gradients,
  buffers and optimizer state). The process's resident-set high-water mark
  (Linux ``VmHWM``, reset through ``/proc/self/clear_refs``) is reported beside
  it: it is what the operating system would kill on, allocator caching included.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class StepMemory:
    """Bytes: ``resident`` before the step, ``peak`` during it (both absolute)."""

    resident: int
    peak: int
    source: str  # "cuda allocator" | "cpu allocator (profiler)"
    reserved: int | None = None
    rss_peak: int | None = None

    @property
    def transient(self) -> int:
        """Bytes the step allocates on top of what lives between steps."""
        return self.peak - self.resident


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views and ties counted once)."""
    seen: dict[tuple[str, int], int] = {}
    for tensor in tensors:
        if tensor.device.type == "meta":
            continue
        storage = tensor.untyped_storage()
        seen[(str(tensor.device), storage.data_ptr())] = storage.nbytes()
    return sum(seen.values())


def live_training_state(
    module: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> list[torch.Tensor]:
    """Parameters, their gradients, buffers and optimizer state: what lives between steps."""
    tensors: list[torch.Tensor] = list(module.parameters()) + list(module.buffers())
    tensors += [p.grad for p in module.parameters() if p.grad is not None]
    for state in optimizer.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    return tensors


def measure_step_memory(
    run_step: Callable[[], object],
    device: torch.device,
    resident_tensors: Callable[[], list[torch.Tensor]],
) -> StepMemory:
    """Run ``run_step`` once and report its peak memory on ``device``.

    Call the optimizer's ``zero_grad`` first: on CPU, frees of blocks allocated
    before the measurement are invisible to it, and ``set_to_none`` frees the
    gradients at the start of every step.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        resident = torch.cuda.memory_allocated(device)
        run_step()
        torch.cuda.synchronize(device)
        return StepMemory(
            resident,
            torch.cuda.max_memory_allocated(device),
            "cuda allocator",
            reserved=torch.cuda.max_memory_reserved(device),
        )
    resident = tensor_bytes(resident_tensors())
    with _rss_high_water() as rss:
        peak_delta = _cpu_peak_delta(run_step)
    return StepMemory(resident, resident + peak_delta, "cpu allocator (profiler)", rss_peak=rss())


def _cpu_peak_delta(run_step: Callable[[], object]) -> int:
    from torch.profiler import ProfilerActivity

    # The allocator warns (once, from C++, on descriptor 2) when a block allocated
    # before profiling is freed inside it; the caller frees the gradients first so
    # that does not happen, and the warning is kept off the user's terminal if it does.
    with _fd2_silenced(), profiled([ProfilerActivity.CPU], profile_memory=True) as prof:
        run_step()
    # Kineto's raw events carry each allocation (+bytes) and free (-bytes) in order;
    # the per-operator tables only hold net sums, which hide the peak.
    session: Any = prof.profiler  # torch.autograd.profiler.profile, loosely typed in stubs
    events: list[Any] = [e for e in session.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    cpu = torch._C._autograd.DeviceType.CPU
    live = peak = 0
    for event in events:
        if event.device_type() == cpu:
            live += event.nbytes()
            peak = max(peak, live)
    return peak


@contextlib.contextmanager
def profiled(activities: list[Any], **options: Any) -> Iterator[torch.profiler.profile]:
    """A ``torch.profiler.profile`` whose start and stop do not print to stderr.

    Kineto writes ``STAGE:``/``USDT:`` lines from C++ straight to file descriptor 2
    when the profiler starts and stops (only ``KINETO_LOG_LEVEL`` set before torch
    is imported silences them), so the descriptor is pointed at /dev/null for
    exactly those two calls; the profiled code's own output is untouched.
    """
    prof = torch.profiler.profile(activities=activities, **options)
    with _fd2_silenced():
        prof.start()
    try:
        yield prof
    finally:
        with _fd2_silenced():
            prof.stop()


@contextlib.contextmanager
def _fd2_silenced() -> Iterator[None]:
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (embedded interpreters): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


@contextlib.contextmanager
def _rss_high_water() -> Iterator[Callable[[], int | None]]:
    """Reset the process's RSS high-water mark; yield a reader of its value (Linux only)."""
    available = _STATUS.exists() and _CLEAR_REFS.exists()
    if available:
        try:
            _CLEAR_REFS.write_text("5")  # 5: reset the peak RSS (proc(5))
        except OSError:
            available = False
    result: list[int | None] = [None]
    try:
        yield lambda: result[0]
    finally:
        if available:
            result[0] = _vm_hwm()


def _vm_hwm() -> int | None:
    for line in _STATUS.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def available_memory(device: torch.device) -> int | None:
    """Bytes the step may still use: free GPU memory, or Linux's MemAvailable on CPU."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        return None
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None
