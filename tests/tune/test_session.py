"""The interleaved session, driven by a fake clock and synthetic steps (no wall time)."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

from torchwise.tune.session import (
    Arm,
    SessionConfig,
    first_round,
    look_confidence,
    look_schedule,
    run_session,
)
from torchwise.tune.stats import Verdict

sys.path.insert(0, str(Path(__file__).parent))
import itertools

from synthetic import FakeClock, NoisyMachine


def recording_arm(name: str, clock: FakeClock, log: list[str], seconds: float = 0.01) -> Arm:
    def run(steps: int) -> None:
        for _ in range(steps):
            log.append(name)
            clock.advance(seconds)

    return Arm(name, run)


def test_every_sample_is_a_baseline_arm_pair_in_random_order() -> None:
    clock, log = FakeClock(), []
    base = recording_arm("B", clock, log)
    arms = [recording_arm(n, clock, log) for n in "XYZ"]
    config = SessionConfig(warmup_steps=2, min_rounds=4, max_rounds=4, target_sample_s=0.01)
    result = run_session(base, arms, config, clock=clock)
    # Warm-up: 2 single steps per arm, baseline first.
    assert log[:8] == ["B", "B", "X", "X", "Y", "Y", "Z", "Z"]
    timed = log[8:]
    assert len(timed) == 4 * 3 * 2  # rounds x arms x (arm + baseline), one step per sample
    pairs = [tuple(timed[i : i + 2]) for i in range(0, len(timed), 2)]
    assert all("B" in pair and len(set(pair)) == 2 for pair in pairs)
    orders = collections.Counter(pair[0] == "B" for pair in pairs)
    assert orders[True] > 0 and orders[False] > 0  # both orders occur
    rounds = [pairs[i : i + 3] for i in range(0, len(pairs), 3)]
    assert all(sorted(p[0] if p[1] == "B" else p[1] for p in r) == list("XYZ") for r in rounds)
    assert {len(r.samples) for r in result.arms.values()} == {4}
    assert len(result.baseline.samples) == 12


def test_the_first_step_is_kept_apart_from_the_samples() -> None:
    machine = NoisyMachine(seed=1, jitter=0.0, spike_p=0.0, max_load=1.0)
    base = machine.arm("base", 0.01)
    slow_start = machine.arm("compiled", 0.005, first_step_s=30.0)
    result = run_session(
        base, [slow_start], SessionConfig(min_rounds=8, max_rounds=12), clock=machine.clock
    )
    arm = result.arms["compiled"]
    assert arm.first_step_s == pytest.approx(30.0)
    assert max(arm.times) < 0.01
    assert arm.comparison is not None and arm.comparison.verdict is Verdict.FASTER


def test_all_arms_share_the_baselines_steps_per_sample() -> None:
    machine = NoisyMachine(seed=2, jitter=0.0, spike_p=0.0, max_load=1.0)
    config = SessionConfig(target_sample_s=0.05, min_rounds=8, max_rounds=8)
    result = run_session(
        machine.arm("base", 0.01), [machine.arm("fast", 0.004)], config, clock=machine.clock
    )
    assert result.baseline.steps_per_sample == 5 == result.arms["fast"].steps_per_sample


def test_an_arm_that_raises_is_a_result_and_the_others_go_on() -> None:
    machine = NoisyMachine(seed=3)
    result = run_session(
        machine.arm("base", 0.01),
        [machine.failing_arm("broken", after_steps=5), machine.arm("ok", 0.01)],
        SessionConfig(min_rounds=8, max_rounds=12),
        clock=machine.clock,
    )
    assert result.arms["broken"].error == "RuntimeError: broken broke the step"
    assert result.arms["broken"].comparison is None
    assert result.arms["ok"].comparison is not None


def test_a_failing_baseline_is_raised() -> None:
    machine = NoisyMachine(seed=4)
    with pytest.raises(RuntimeError):
        run_session(
            machine.failing_arm("base"),
            [machine.arm("x", 0.01)],
            SessionConfig(),
            clock=machine.clock,
        )


def test_the_budget_stops_the_session_after_the_first_look() -> None:
    machine = NoisyMachine(seed=5, jitter=0.3)
    config = SessionConfig(budget_s=3.0, max_rounds=1000)
    result = run_session(
        machine.arm("base", 0.01), [machine.arm("same", 0.01)], config, clock=machine.clock
    )
    assert result.stop_reason == "time budget of 3 s"
    assert result.rounds >= first_round(config)
    # The last round may only start if it fits: overrun is at most one round.
    round_time = result.elapsed_s / result.rounds
    assert result.elapsed_s <= config.budget_s + 2 * round_time


def test_the_first_look_waits_for_enough_pairs() -> None:
    config = SessionConfig()
    # 99% overall over the Bonferroni-split looks needs 12 pairs before any interval exists.
    assert first_round(config) == 12
    looks = sorted(look_schedule(first_round(config), config.max_rounds))
    assert looks[0] == 12 and looks[-1] == config.max_rounds
    assert all(b / a <= 1.25 for a, b in itertools.pairwise(looks))
    assert 1 - look_confidence(config) == pytest.approx(0.01 / len(look_schedule(8, 150)))


def test_settled_arms_stop_being_measured() -> None:
    machine = NoisyMachine(seed=6, jitter=0.3, spike_p=0.0, max_load=1.0)
    result = run_session(
        machine.arm("base", 0.01),
        [machine.arm("much-faster", 0.005), machine.arm("same", 0.01)],
        SessionConfig(max_rounds=60, budget_s=1e9),
        clock=machine.clock,
    )
    assert len(result.arms["much-faster"].samples) == 12  # settled at the first look
    assert len(result.arms["same"].samples) > 12


SEEDS = range(100)


@pytest.fixture(scope="module")
def repeated_runs() -> dict[str, collections.Counter[Verdict]]:
    """100 independent sessions of 30 (simulated) seconds on a harshly loaded machine.

    Per step: 20% log-normal jitter, 8% of steps pre-empted for 2-5x their time,
    and a machine-wide load factor jumping between 1x and 2.5x every 0.1-2 s.
    """
    verdicts: dict[str, collections.Counter[Verdict]] = collections.defaultdict(collections.Counter)
    for seed in SEEDS:
        machine = NoisyMachine(seed=seed, jitter=0.2, spike_p=0.08, max_load=2.5)
        arms = [
            machine.arm("none-a", 0.010),
            machine.arm("none-b", 0.010),
            # "over 20%": a fifth less time per step, or a quarter more (the same log distance)
            machine.arm("20%-faster", 0.008),
            machine.arm("25%-slower", 0.0125),
        ]
        config = SessionConfig(seed=seed, budget_s=30.0)
        result = run_session(machine.arm("base", 0.010), arms, config, clock=machine.clock)
        for name, arm in result.arms.items():
            assert arm.comparison is not None
            verdicts[name][arm.comparison.verdict] += 1
    return verdicts


def test_knobs_with_no_effect_get_no_significant_difference(repeated_runs) -> None:  # type: ignore[no-untyped-def]
    # Over 200 null comparisons the overall error is promised at 1%; allow 2%.
    null = repeated_runs["none-a"] + repeated_runs["none-b"]
    assert null[Verdict.SAME] >= 0.98 * sum(null.values()), null


def test_knobs_with_a_large_effect_get_the_same_verdict_every_time(repeated_runs) -> None:  # type: ignore[no-untyped-def]
    assert repeated_runs["20%-faster"][Verdict.FASTER] >= 0.98 * len(SEEDS), repeated_runs
    assert repeated_runs["25%-slower"][Verdict.SLOWER] >= 0.98 * len(SEEDS), repeated_runs
    assert repeated_runs["20%-faster"][Verdict.SLOWER] == 0
    assert repeated_runs["25%-slower"][Verdict.FASTER] == 0
