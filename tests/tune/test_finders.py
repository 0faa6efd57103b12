"""The batch-size finder and the learning-rate range test, on synthetic models of
memory and loss, then once each on a real tiny model."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
import torch

from torchwise.tune.batch_size import (
    VERIFY_STEPS,
    SearchOutcome,
    SizeRun,
    find_batch_size,
    resize_batch,
    search_batch_size,
)
from torchwise.tune.lr_range import analyse_curve, lr_range_test
from torchwise.tune.render.common import batch_size_lines
from torchwise.tune.step import Batch, Workload

MiB = 2**20


class MemoryModel:
    """peak(size) = fixed + per_sample * size; step time = ``step_s(size)``; sizes in
    ``fail_verify`` fail the 10-step run."""

    def __init__(
        self,
        fixed: int = 100 * MiB,
        per_sample: int = 10 * MiB,
        fail_verify: frozenset[int] = frozenset(),
        oom_above: int | None = None,
        step_s: Callable[[int], float] = lambda size: 0.001 * size**0.8,
    ) -> None:
        self.fixed, self.per_sample = fixed, per_sample
        self.fail_verify, self.oom_above = fail_verify, oom_above
        self.step_s = step_s
        self.tried: list[tuple[str, int]] = []

    def peak(self, size: int) -> int:
        return self.fixed + self.per_sample * size

    def probe(self, size: int, steps: int) -> SizeRun:
        self.tried.append(("probe", size))
        if self.oom_above is not None and size > self.oom_above:
            return SizeRun(size, False, steps, error="out of memory")
        return SizeRun(size, True, steps, self.peak(size), self.step_s(size))

    def verify(self, size: int, steps: int) -> SizeRun:
        self.tried.append(("verify", size))
        assert steps == VERIFY_STEPS
        if size in self.fail_verify:  # e.g. fragmentation growing over steps
            return SizeRun(size, False, steps, error="out of memory at step 7")
        return SizeRun(size, True, steps, self.peak(size), self.step_s(size))

    def probed(self) -> list[int]:
        return [size for kind, size in self.tried if kind == "probe"]


def search(model: MemoryModel, start: int = 8, **kwargs: object) -> SearchOutcome:
    options = {"budget": 1000 * MiB, "headroom": 0.2, **kwargs}
    return search_batch_size(start, model.probe, model.verify, **options)  # type: ignore[arg-type]


def test_pick_leaves_headroom_and_passes_ten_steps() -> None:
    model = MemoryModel()
    out = search(model)
    # 100 + 10*64 = 740 MiB <= 800 (80% of 1000); 128 would need 1380 MiB.
    assert out.pick == 64
    assert model.peak(out.pick) <= 0.8 * 1000 * MiB
    assert out.verifications[-1].size == 64 and out.verifications[-1].ok
    assert "10-step" in out.reason


def test_never_the_size_that_just_fit() -> None:
    # 64 fits (740 MiB of 800 budget... ) but leaves under 20% free: the pick is 32.
    model = MemoryModel(fixed=100 * MiB, per_sample=10 * MiB)
    out = search(model, budget=800 * MiB)
    assert model.peak(64) <= 800 * MiB  # it fit
    assert out.pick == 32
    assert "batch 64 was faster" in out.reason


def test_a_size_that_fails_its_ten_step_run_is_never_returned() -> None:
    model = MemoryModel(fail_verify=frozenset({64, 32}))
    out = search(model)
    assert out.pick == 16
    assert [v.size for v in out.verifications] == [64, 32, 16]


@pytest.mark.parametrize("seed", range(20))
def test_random_models_never_yield_a_failing_or_slower_size(seed: int) -> None:
    rng = random.Random(seed)
    knee = 2 ** rng.randint(0, 8)
    model = MemoryModel(
        fixed=rng.randint(1, 400) * MiB,
        per_sample=rng.randint(1, 50) * MiB,
        fail_verify=frozenset(2**k for k in range(10) if rng.random() < 0.3),
        # throughput grows up to the knee, then falls
        step_s=lambda size: 0.001 * size * (1 if size <= knee else 1.3 * size / knee),
    )
    out = search(model, start=2 ** rng.randint(0, 5))
    if out.pick is not None:
        assert out.pick not in model.fail_verify
        assert model.peak(out.pick) <= 0.8 * 1000 * MiB
        assert any(v.size == out.pick and v.ok for v in out.verifications)
        # never a size slower than the best measured among those that leave headroom
        rates = {
            r.size: r.samples_per_s
            for r in out.probes
            if r.ok and r.peak is not None and r.peak <= 0.8 * 1000 * MiB
        }
        passed = {v.size for v in out.verifications if v.ok}
        best = max(rate for size, rate in rates.items() if size in passed)  # type: ignore[type-var]
        assert rates[out.pick] == best


def test_the_doubling_stops_when_throughput_falls_and_picks_the_fastest() -> None:
    # samples/s: 8 -> 1000, 16 -> 1000, 32 -> 1000, 64 -> 500 (each step 2x slower past 32)
    model = MemoryModel(per_sample=1 * MiB, step_s=lambda size: size / 1000 * max(1, size / 32))
    out = search(model, start=8)
    assert model.probed() == [8, 16, 32, 64]  # 64's fall stops it: 128 is never tried
    assert "throughput fell" in out.stop
    assert out.pick in (8, 16, 32)


def test_the_time_budget_bounds_the_search() -> None:
    spent = [0.0]

    def time_left() -> float:
        return 30.0 - spent[0]

    def probe(size: int, steps: int) -> SizeRun:
        spent[0] += 0.1 * size / 8 * (steps + 2)  # what the probe costs on a fake clock
        return SizeRun(size, True, steps, size * MiB, 0.1 * size / 8)

    out = search_batch_size(8, probe, probe, budget=10**6 * MiB, time_left=time_left)
    # 8: 1 s, 16: 2 s, 32: 4 s, 64: 8 s = 15 s; 128 (16 s + its verification) would not fit 30 s
    assert [r.size for r in out.probes] == [8, 16, 32, 64]
    assert "time budget" in out.stop
    assert spent[0] <= 30 * 1.2


def test_a_known_start_size_is_not_timed_again() -> None:
    model = MemoryModel()
    known = SizeRun(8, True, 0, model.peak(8), 0.5)
    seen: list[SizeRun] = []
    out = search(model, known=known, notify=seen.append)
    assert model.probed()[0] == 16 and out.probes[0] is known
    assert [r.size for r in seen] == [r.size for r in out.probes]  # progress per size


def test_sizes_predicted_over_budget_are_not_tried() -> None:
    model = MemoryModel(fixed=10 * MiB, per_sample=100 * MiB)
    out = search(model, start=1)
    assert model.probed() == [1, 2, 4, 8]
    assert out.probes[-1].size == 16 and "not tried" in (out.probes[-1].error or "")
    assert out.pick == 4  # 410 MiB; 8 -> 810 MiB > 800


def test_the_cap_is_respected() -> None:
    out = search(MemoryModel(), cap=24)
    assert out.pick == 24 and "the cap" in out.stop


def test_a_batch_that_does_not_fit_is_halved() -> None:
    model = MemoryModel(oom_above=6)
    out = search(model, start=32)
    assert model.probed()[:3] == [32, 16, 8]
    assert out.pick == 4


def test_nothing_fits() -> None:
    out = search(MemoryModel(fixed=2000 * MiB), start=4)
    assert out.pick is None and "batch of 1" in out.reason


def test_resize_batch_tiles_only_batched_tensors() -> None:
    x = torch.arange(6.0).reshape(3, 2)
    mask = torch.ones(5)
    batch = Batch((x, mask), {}, torch.tensor([0, 1, 2]))
    resized = resize_batch(batch, 7)
    assert resized.args[0].shape == (7, 2) and torch.equal(resized.args[0][3], x[0])
    assert resized.args[1] is mask or torch.equal(resized.args[1], mask)
    assert resized.target is not None and resized.target.tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_find_batch_size_on_a_real_model(mlp_workload: Workload) -> None:
    result = find_batch_size(mlp_workload, memory_budget=1 * MiB, max_batch_size=32)
    assert result.pick is not None and result.pick >= 8
    passed = [v for v in result.verifications if v.size == result.pick]
    assert passed and passed[-1].ok and passed[-1].peak is not None
    assert passed[-1].peak <= 0.8 * MiB or result.pick == 32
    assert "10-step" in result.reason
    assert any(line.startswith("  pick") for line in batch_size_lines(result))


def test_find_batch_size_reports_progress_and_keeps_the_baselines_step_time(
    mlp_workload: Workload,
) -> None:
    lines: list[str] = []
    result = find_batch_size(
        mlp_workload,
        memory_budget=1 * MiB,
        max_batch_size=16,
        start_step_s=0.25,
        notify=lines.append,
    )
    assert result.probes[0].seconds_per_step == 0.25 and result.start_step_from_baseline
    assert lines and lines[0].startswith("  batch 8:")
    rows = [line for line in batch_size_lines(result) if line.strip().startswith("8:")]
    assert rows == ["       8: " + rows[0].split(": ", 1)[1]] and "(the baseline's)" in rows[0]


# -- learning rate ------------------------------------------------------------------


def lr_grid(n: int = 100, low: float = 1e-6, high: float = 10.0) -> list[float]:
    return [low * (high / low) ** (i / (n - 1)) for i in range(n)]


def good_curve(lrs: list[float], noise: float, seed: int, centre: float = 1e-3) -> list[float]:
    """A textbook curve: flat, a sigmoid fall around ``centre``, then divergence."""
    rng = random.Random(seed)
    out = []
    for lr in lrs:
        x = math.log10(lr) - math.log10(centre)
        loss = 2.3 - 1.5 / (1 + math.exp(-3 * x)) + (0.8 * (x - 1.2) ** 2 if x > 1.2 else 0)
        out.append(loss + rng.gauss(0, noise))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_a_clean_curve_gets_a_confident_pick_near_the_steepest_fall(seed: int) -> None:
    lrs = lr_grid()
    analysis = analyse_curve(lrs, good_curve(lrs, 0.02, seed))
    assert analysis.pick is not None
    assert abs(math.log10(analysis.pick) - math.log10(1e-3)) < 0.35
    assert analysis.confidence in ("high", "medium")


def test_a_diverging_curve_is_refused() -> None:
    lrs = lr_grid()
    rng = random.Random(0)
    losses = [2.0 + 0.5 * i / 10 + rng.gauss(0, 0.02) for i in range(len(lrs))]
    analysis = analyse_curve(lrs, losses)
    assert analysis.pick is None and "rises" in analysis.reason


def test_a_flat_curve_is_refused() -> None:
    lrs = lr_grid()
    rng = random.Random(1)
    analysis = analyse_curve(lrs, [2.3 + rng.gauss(0, 0.05) for _ in lrs])
    assert analysis.pick is None and "flat" in analysis.reason


def test_a_noisy_curve_is_refused() -> None:
    lrs = lr_grid()
    analysis = analyse_curve(lrs, good_curve(lrs, noise=0.6, seed=2))
    assert analysis.pick is None
    assert "noisy" in analysis.reason or "flat" in analysis.reason


def test_a_curve_still_falling_at_the_largest_rate_is_low_confidence() -> None:
    lrs = lr_grid(high=1e-3)  # stops at the centre of the fall
    analysis = analyse_curve(lrs, good_curve(lrs, 0.01, 3, centre=3e-4))
    assert analysis.pick is not None and analysis.confidence == "low"
    assert "raise the maximum" in analysis.reason


def test_too_few_points() -> None:
    assert analyse_curve([1e-3] * 5, [1.0] * 5).pick is None


def test_lr_range_test_on_a_real_model(mlp_workload: Workload) -> None:
    result = lr_range_test(mlp_workload, lr_min=1e-5, lr_max=10.0, steps=40)
    assert 10 <= len(result.lrs) <= 40
    assert result.lrs == sorted(result.lrs)
    assert "synthetic batch" in result.data
    assert result.to_dict()["confidence"] in ("high", "medium", "low", "none")
