"""The largest batch size that trains reliably within a memory budget, with headroom.

Lightning's batch-size finder returns the size that just fit in a few steps, and
users report it then running out of memory in ``fit``. This one:

1. doubles the batch from the current size (halving first if that does not fit),
   running a short probe at each size: peak memory of one step, then step time;
2. never tries a size whose peak, extrapolated linearly from the sizes measured
   so far, would exceed the budget (an out-of-memory on CPU is the kernel
   killing the process, not an exception);
3. picks the largest size whose measured peak leaves ``headroom`` of the budget
   free (so never the size that just fit), capped at ``max_batch_size``;
4. verifies the pick with a 10-step run at that size on a fresh copy; a size that
   fails it (an exception, a non-finite loss, memory over the budget) is dropped
   and the next smaller candidate is verified instead.

The search itself (:func:`search_batch_size`) takes the probe and the
verification as functions, so tests drive it with synthetic memory models.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from torchwise.tune.memory import available_memory, live_training_state, measure_step_memory
from torchwise.tune.report import fmt_bytes, fmt_time
from torchwise.tune.stats import median
from torchwise.tune.step import Batch, StepSettings, TrainingStep, Workload, map_tensors

VERIFY_STEPS = 10


@dataclass(frozen=True)
class SizeRun:
    """A run at one batch size: ``ok`` when every step ran, finite, within the budget."""

    size: int
    ok: bool
    steps: int
    peak: int | None = None
    seconds_per_step: float | None = None
    error: str | None = None

    @property
    def samples_per_s(self) -> float | None:
        if self.seconds_per_step is None or self.seconds_per_step <= 0:
            return None
        return self.size / self.seconds_per_step


Probe = Callable[[int, int], SizeRun]


@dataclass
class BatchSizeResult:
    start: int
    budget: int
    budget_source: str
    headroom: float
    cap: int | None
    probes: list[SizeRun]
    verifications: list[SizeRun] = field(default_factory=list)
    pick: int | None = None
    reason: str = ""

    @property
    def knee(self) -> int | None:
        """The smallest size within 5% of the best measured throughput."""
        rates = [(r.size, r.samples_per_s) for r in self.probes if r.ok and r.samples_per_s]
        if not rates:
            return None
        best = max(rate for _, rate in rates if rate is not None)
        return min(size for size, rate in rates if rate is not None and rate >= 0.95 * best)

    def to_dict(self) -> dict[str, Any]:
        def run(r: SizeRun) -> dict[str, Any]:
            return {
                "size": r.size,
                "ok": r.ok,
                "steps": r.steps,
                "peak_bytes": r.peak,
                "seconds_per_step": r.seconds_per_step,
                "samples_per_s": r.samples_per_s,
                "error": r.error,
            }

        return {
            "start": self.start,
            "budget_bytes": self.budget,
            "budget_source": self.budget_source,
            "headroom": self.headroom,
            "max_batch_size": self.cap,
            "probes": [run(r) for r in self.probes],
            "verifications": [run(r) for r in self.verifications],
            "pick": self.pick,
            "throughput_knee": self.knee,
            "reason": self.reason,
        }

    def text_lines(self) -> list[str]:
        lines = [
            f"Batch size (budget {fmt_bytes(self.budget)} from {self.budget_source}, "
            f"{self.headroom:.0%} headroom" + (f", capped at {self.cap}" if self.cap else "") + ")"
        ]
        for r in self.probes:
            if r.ok:
                rate = f", {r.samples_per_s:,.0f} samples/s" if r.samples_per_s else ""
                step = fmt_time(r.seconds_per_step) if r.seconds_per_step else "n/a"
                lines.append(f"  {r.size:>6}: peak {fmt_bytes(r.peak)}, step {step}{rate}")
            else:
                lines.append(f"  {r.size:>6}: {r.error}")
        for v in self.verifications:
            state = "passed" if v.ok else f"failed ({v.error})"
            lines.append(f"  {VERIFY_STEPS}-step run at {v.size}: {state}")
        lines.append(
            f"  pick: {self.pick}: {self.reason}" if self.pick else f"  no pick: {self.reason}"
        )
        rates = [(r.samples_per_s, r.size) for r in self.probes if r.ok and r.samples_per_s]
        if rates:
            best_rate, best_size = max(rates)
            line = (
                f"  best measured throughput: {best_rate:,.0f} samples/s at batch size {best_size}"
            )
            if self.knee is not None and self.knee < best_size:
                line += f" (within 5% of it from {self.knee})"
            lines.append(line)
        return lines


def search_batch_size(
    start: int,
    probe: Probe,
    verify: Probe,
    *,
    budget: int,
    headroom: float = 0.2,
    cap: int | None = None,
    probe_steps: int = 8,
    max_doublings: int = 16,
) -> tuple[list[SizeRun], list[SizeRun], int | None, str]:
    """(probes, verifications, pick, reason): the algorithm of the module docstring."""
    limit = budget * (1 - headroom)
    probes: list[SizeRun] = []

    def fits(run: SizeRun) -> bool:
        return run.ok and run.peak is not None and run.peak <= budget

    size = start
    first = probe(size, probe_steps)
    probes.append(first)
    while not fits(first) and size > 1:  # the current batch does not fit: halve
        size //= 2
        first = probe(size, probe_steps)
        probes.append(first)
    if not fits(first):
        return probes, [], None, "even a batch of 1 does not fit the budget"
    for _ in range(max_doublings):
        nxt = size * 2 if cap is None else min(size * 2, cap)
        if nxt <= size:
            break
        predicted = _predict([r for r in probes if fits(r)], nxt)
        if predicted is not None and predicted > budget:
            probes.append(
                SizeRun(
                    nxt,
                    False,
                    0,
                    predicted,
                    error=f"not tried: predicted peak {fmt_bytes(predicted)} exceeds the budget",
                )
            )
            break
        run = probe(nxt, probe_steps)
        probes.append(run)
        if not fits(run):
            break
        size = nxt
    candidates = sorted(
        (r.size for r in probes if fits(r) and r.peak is not None and r.peak <= limit),
        reverse=True,
    )
    verifications: list[SizeRun] = []
    for candidate in candidates:
        result = verify(candidate, VERIFY_STEPS)
        verifications.append(result)
        if result.ok and result.peak is not None and result.peak <= budget:
            capped = cap is not None and candidate == cap
            reason = (
                f"the largest size whose peak leaves {headroom:.0%} of the budget free"
                + (" (the cap)" if capped else "")
                + f", and it passed a {VERIFY_STEPS}-step run"
            )
            return probes, verifications, candidate, reason
    if not candidates:
        return (
            probes,
            verifications,
            None,
            (f"no size left {headroom:.0%} of the budget free; lower the headroom or the batch"),
        )
    return probes, verifications, None, f"every candidate failed its {VERIFY_STEPS}-step run"


def _predict(runs: list[SizeRun], size: int) -> int | None:
    """Peak at ``size`` from a least-squares line through the largest measured sizes."""
    points = sorted((r.size, r.peak) for r in runs if r.peak is not None)[-3:]
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return math.ceil(my + slope * (size - mx))


def resize_batch(batch: Batch, size: int, dim: int = 0) -> Batch:
    """``batch`` with ``size`` samples along ``dim``, repeating its samples cyclically."""
    current = batch_size_of(batch, dim)

    def tile(t: torch.Tensor) -> torch.Tensor:
        if t.dim() <= dim or t.shape[dim] != current:
            return t  # not batched along dim (a shared mask, a scalar)
        index = torch.arange(size) % current
        return t.index_select(dim, index.to(t.device))

    args, kwargs, target = map_tensors((batch.args, batch.kwargs, batch.target), tile)
    return Batch(args, kwargs, target)


def batch_size_of(batch: Batch, dim: int = 0) -> int:
    from torchwise.tune.step import tensors_in

    for tensor in tensors_in((batch.args, batch.kwargs)):
        if tensor.dim() > dim:
            return int(tensor.shape[dim])
    raise ValueError("the batch has no tensor with a batch dimension")


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return (
        isinstance(exc, torch.OutOfMemoryError)
        or "out of memory" in text
        or ("can't allocate memory" in text)
    )


def _real_run(workload: Workload, size: int, steps: int, dim: int) -> SizeRun:
    sized = Workload(
        workload.model,
        resize_batch(workload.batch, size, dim),
        workload.loss_fn,
        workload.optimizer,
        workload.device,
        None,
        workload.name,
    )
    try:
        step = TrainingStep(sized, StepSettings())
        with step.scope():
            step.run(1)  # warm-up: allocates gradients and optimizer state
            step.zero_grad()
            memory = measure_step_memory(
                step.step, step.device, lambda: live_training_state(step.module, step.optimizer)
            )
            peak = memory.peak
            # Time single steps (median: robust to a pre-empted one) for up to
            # ``steps`` steps or a quarter of a second, whichever comes first.
            times: list[float] = []
            deadline = time.perf_counter() + 0.25
            for _ in range(max(1, steps - 2)):
                started = time.perf_counter()
                step.run(1)
                times.append(time.perf_counter() - started)
                if started > deadline and len(times) >= 3:
                    break
            seconds = median(times)
            if not math.isfinite(step.last_loss()):
                return SizeRun(size, False, steps, peak, seconds, "non-finite loss")
            if step.device.type == "cuda":
                peak = max(peak, torch.cuda.max_memory_allocated(step.device))
        return SizeRun(size, True, steps, peak, seconds)
    except Exception as exc:
        kind = "out of memory" if _is_oom(exc) else f"{type(exc).__name__}: {exc}"
        return SizeRun(size, False, steps, error=kind.splitlines()[0][:200])
    finally:
        if workload.device.type == "cuda":
            torch.cuda.empty_cache()


def find_batch_size(
    workload: Workload,
    *,
    max_batch_size: int | None = None,
    memory_budget: int | None = None,
    headroom: float = 0.2,
    batch_dim: int = 0,
) -> BatchSizeResult:
    """The module docstring's search on the real step (fresh copies at every size)."""
    start = batch_size_of(workload.batch, batch_dim)
    if memory_budget is not None:
        budget, source = memory_budget, "--memory-budget"
    else:
        free = available_memory(workload.device)
        if free is None:
            budget, source = 4 * 2**30, "a 4 GiB default (free memory unknown)"
        elif workload.device.type == "cuda":
            budget, source = free, "free GPU memory"
        else:
            budget, source = free // 2, "half of MemAvailable (a shared machine)"

    def run(size: int, steps: int) -> SizeRun:
        return _real_run(workload, size, steps, batch_dim)

    probes, verifications, pick, reason = search_batch_size(
        start, run, run, budget=budget, headroom=headroom, cap=max_batch_size
    )
    return BatchSizeResult(
        start, budget, source, headroom, max_batch_size, probes, verifications, pick, reason
    )
