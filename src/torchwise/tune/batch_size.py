"""The batch size with the best training throughput that fits a memory budget with headroom.

Lightning's batch-size finder returns the size that just fit in a few steps, and
users report it then running out of memory in ``fit``; and a larger batch is
only worth its memory while it trains faster. This search:

1. doubles the batch from the current size (halving first if that does not fit),
   running a short probe at each size: peak memory of one step, then step time;
2. never tries a size whose peak, extrapolated linearly from the sizes measured
   so far, would exceed the memory budget (on CPU an out-of-memory is the kernel
   killing the process, not an exception), nor one whose probe and verification,
   extrapolated from the last step time, would overrun the time it was given;
3. stops doubling once throughput (samples per second) falls below the best
   measured by more than :data:`THROUGHPUT_DROP`: past that point a larger batch
   costs memory and buys nothing;
4. picks the size with the best measured throughput among those whose peak
   leaves ``headroom`` of the budget free (so never the size that just fit),
   capped at ``max_batch_size``, and says when a faster size was left out for
   memory;
5. verifies the pick with a 10-step run on a fresh copy; a size that fails it (an
   exception, a non-finite loss, memory over the budget) is dropped and the next
   best is verified instead.

The search itself (:func:`search_batch_size`) takes the probe, the verification
and the clock as functions, so tests drive it with synthetic models of memory and
time.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from torchwise.tensortree import map_tensors, tensors_in
from torchwise.tune.memory import available_memory, live_training_state, measure_step_memory
from torchwise.tune.stats import median
from torchwise.tune.step import Batch, StepSettings, TrainingStep, Workload
from torchwise.units import duration, nbytes

VERIFY_STEPS = 10
#: Throughput below the best measured by more than this share ends the doubling.
THROUGHPUT_DROP = 0.05


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
    #: why the doubling stopped
    stop: str = ""
    #: seconds the search was given, and took
    time_budget_s: float | None = None
    elapsed_s: float = 0.0
    #: the start size's step time came from the tune run's baseline, not a probe
    start_step_from_baseline: bool = False

    @property
    def best_measured(self) -> SizeRun | None:
        """The probe with the best throughput, fitting or not."""
        rated = [r for r in self.probes if r.ok and r.samples_per_s]
        return max(rated, key=lambda r: r.samples_per_s or 0.0, default=None)

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

        best = self.best_measured
        return {
            "start": self.start,
            "budget_bytes": self.budget,
            "budget_source": self.budget_source,
            "headroom": self.headroom,
            "max_batch_size": self.cap,
            "probes": [run(r) for r in self.probes],
            "verifications": [run(r) for r in self.verifications],
            "pick": self.pick,
            "best_measured": best.size if best is not None else None,
            "reason": self.reason,
            "stop": self.stop,
            "time_budget_s": self.time_budget_s,
            "elapsed_s": self.elapsed_s,
            "start_step_from_baseline": self.start_step_from_baseline,
        }


@dataclass(frozen=True)
class SearchOutcome:
    probes: list[SizeRun]
    verifications: list[SizeRun]
    pick: int | None
    reason: str
    stop: str


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
    time_left: Callable[[], float] = lambda: math.inf,
    known: SizeRun | None = None,
    notify: Callable[[SizeRun], None] = lambda _: None,
) -> SearchOutcome:
    """The algorithm of the module docstring. ``known`` is an already measured start size."""
    limit = budget * (1 - headroom)
    probes: list[SizeRun] = []

    def fits(run: SizeRun) -> bool:
        return run.ok and run.peak is not None and run.peak <= budget

    def measure(size: int) -> SizeRun:
        run = known if known is not None and known.size == size else probe(size, probe_steps)
        probes.append(run)
        notify(run)
        return run

    size = start
    first = measure(size)
    while not fits(first) and size > 1:  # the current batch does not fit: halve
        size //= 2
        first = measure(size)
    if not fits(first):
        return SearchOutcome(probes, [], None, "even a batch of 1 does not fit the budget", "")
    stop = f"{max_doublings} doublings"
    for _ in range(max_doublings):
        nxt = size * 2 if cap is None else min(size * 2, cap)
        if nxt <= size:
            stop = f"the cap ({cap})"
            break
        predicted = _predict([r for r in probes if fits(r)], nxt)
        if predicted is not None and predicted > budget:
            skipped = SizeRun(
                nxt, False, 0, predicted,
                error=f"not tried: predicted peak {nbytes(predicted)} exceeds the budget",
            )  # fmt: skip
            probes.append(skipped)
            notify(skipped)
            stop = "the memory budget"
            break
        last = probes[-1]
        if last.seconds_per_step is not None:
            # the probe's steps plus a verification, at a step time growing with the batch
            cost = last.seconds_per_step * nxt / last.size * (probe_steps + 2 + VERIFY_STEPS)
            if cost > time_left():
                stop = f"the time budget (batch {nxt} would take about {duration(cost)})"
                break
        run = measure(nxt)
        if not fits(run):
            stop = f"batch {nxt} did not fit"
            break
        size = nxt
        if _throughput_fell(probes):
            stop = f"throughput fell by more than {THROUGHPUT_DROP:.0%} at batch {nxt}"
            break
    candidates = sorted(
        (r for r in probes if fits(r) and r.peak is not None and r.peak <= limit),
        key=lambda r: (-(r.samples_per_s or 0.0), -r.size),
    )
    best = max(
        (r for r in probes if fits(r) and r.samples_per_s), key=lambda r: r.samples_per_s or 0.0,
        default=None,
    )  # fmt: skip
    verifications: list[SizeRun] = []
    for candidate in candidates:
        result = verify(candidate.size, VERIFY_STEPS)
        verifications.append(result)
        if result.ok and result.peak is not None and result.peak <= budget:
            reason = (
                f"the best measured throughput ({candidate.samples_per_s or 0:,.0f} samples/s) "
                f"among the sizes whose peak leaves {headroom:.0%} of the memory budget free"
            )
            if best is not None and best.size != candidate.size:
                reason += (
                    f"; batch {best.size} was faster ({best.samples_per_s or 0:,.0f} samples/s) "
                    "but leaves less headroom"
                )
            return SearchOutcome(
                probes, verifications, candidate.size,
                reason + f"; it passed a {VERIFY_STEPS}-step run", stop,
            )  # fmt: skip
    if not candidates:
        reason = f"no size left {headroom:.0%} of the budget free; lower the headroom or the batch"
        return SearchOutcome(probes, verifications, None, reason, stop)
    return SearchOutcome(
        probes, verifications, None, f"every candidate failed its {VERIFY_STEPS}-step run", stop
    )


def _throughput_fell(probes: list[SizeRun]) -> bool:
    rates = [r.samples_per_s for r in probes if r.ok and r.samples_per_s]
    return len(rates) >= 2 and rates[-1] < (1 - THROUGHPUT_DROP) * max(rates[:-1])


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
    time_budget_s: float | None = None,
    start_step_s: float | None = None,
    notify: Callable[[str], None] = lambda _: None,
    clock: Callable[[], float] = time.perf_counter,
) -> BatchSizeResult:
    """The module docstring's search on the real step (fresh copies at every size).

    ``start_step_s``, when given, is the start size's step time already measured
    (tune's baseline): the start size is probed for memory only, and the report
    shows one step time for it.
    """
    started = clock()
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

    known = None
    if start_step_s is not None:
        memory_only = _real_run(workload, start, 1, batch_dim)
        known = dataclasses.replace(memory_only, steps=0, seconds_per_step=start_step_s)

    def time_left() -> float:
        if time_budget_s is None:
            return math.inf
        return time_budget_s - (clock() - started)

    def progress(r: SizeRun) -> None:
        if r.ok:
            notify(
                f"  batch {r.size}: peak {nbytes(r.peak)}, {duration(r.seconds_per_step)} a step, "
                f"{r.samples_per_s or 0:,.0f} samples/s"
            )
        else:
            notify(f"  batch {r.size}: {r.error}")

    outcome = search_batch_size(
        start,
        run,
        run,
        budget=budget,
        headroom=headroom,
        cap=max_batch_size,
        time_left=time_left,
        known=known,
        notify=progress,
    )
    return BatchSizeResult(
        start,
        budget,
        source,
        headroom,
        max_batch_size,
        outcome.probes,
        outcome.verifications,
        outcome.pick,
        outcome.reason,
        outcome.stop,
        time_budget_s,
        clock() - started,
        known is not None,
    )
