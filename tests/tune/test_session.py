"""The interleaved session, driven by a fake clock and synthetic steps (no wall time)."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from torchwise.tune.session import (
    Arm,
    ArmResult,
    SessionConfig,
    first_round,
    look_confidence,
    look_schedule,
    run_session,
)
from torchwise.tune.stats import Verdict

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import FakeClock, NoisyMachine, ThreadSwitchMachine


def recording_arm(name: str, clock: FakeClock, log: list[str], seconds: float = 0.01) -> Arm:
    def run(steps: int) -> None:
        for _ in range(steps):
            log.append(name)
            clock.advance(seconds)

    return Arm(name, run)


def test_every_arm_runs_next_to_a_baseline_sample_in_shuffled_rounds() -> None:
    clock, log = FakeClock(), []
    base = recording_arm("B", clock, log)
    arms = [recording_arm(n, clock, log) for n in "WXYZ"]
    config = SessionConfig(warmup_steps=2, min_rounds=6, max_rounds=6, target_sample_s=0.01)
    result = run_session(base, arms, config, clock=clock)
    # Warm-up: 2 single steps per arm, baseline first.
    assert log[:10] == ["B", "B", "W", "W", "X", "X", "Y", "Y", "Z", "Z"]
    timed = log[10:]
    # Each round: B a a B a a B (4 arms + 3 baseline samples), one step per sample.
    assert len(timed) == 6 * 7
    rounds = [timed[i : i + 7] for i in range(0, len(timed), 7)]
    after_base = collections.Counter()
    for sequence in rounds:
        assert sequence[0] == sequence[3] == sequence[6] == "B"
        assert sorted(sequence[1:3] + sequence[4:6]) == list("WXYZ")
        after_base.update([sequence[1], sequence[4]])
    assert len({tuple(r) for r in rounds}) > 1  # the order is shuffled between rounds
    assert set(after_base) == set("WXYZ") and max(after_base.values()) < 6  # both sides occur
    assert {len(r.samples) for r in result.arms.values()} == {6}
    assert len(result.baseline.samples) == 18


def test_an_odd_arm_out_pairs_with_the_sample_before_it() -> None:
    clock, log = FakeClock(), []
    config = SessionConfig(warmup_steps=1, min_rounds=2, max_rounds=2, target_sample_s=0.01)
    run_session(
        recording_arm("B", clock, log), [recording_arm("X", clock, log)], config, clock=clock
    )
    assert log[2:] == ["B", "X", "B", "X"]


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


def test_a_session_whose_first_look_must_fit_runs_no_round_that_would_overrun() -> None:
    machine = NoisyMachine(seed=5, jitter=0.3)
    base, same = machine.arm("base", 0.01), machine.arm("same", 0.01)
    # 11 rounds of two samples of 10 ms steps do not fit in 0.1 s; the warm-up runs.
    tight = SessionConfig(budget_s=0.1, first_look_must_fit=True)
    result = run_session(base, [same], tight, clock=machine.clock)
    assert result.rounds == 0 and result.arms["same"].comparison is None
    assert result.stop_reason.startswith("its first look would take about ")
    assert result.stop_reason.endswith(" s (11 rounds), more than the 0.1 s of budget it had")
    assert result.elapsed_s < 0.25  # the warm-up's six steps; the rounds would add 0.4 s
    # Where they fit, the flag changes nothing.
    roomy = SessionConfig(budget_s=3.0, max_rounds=1000, first_look_must_fit=True)
    result = run_session(base, [same], roomy, clock=machine.clock)
    assert result.stop_reason == "time budget of 3 s" and result.rounds >= first_round(roomy)


def test_the_first_look_waits_for_enough_pairs() -> None:
    config = SessionConfig()
    # 99% overall at the calibrated 0.12% per look needs 11 pairs for any interval.
    assert look_confidence(config) == pytest.approx(0.9988)
    assert first_round(config) == 11
    looks = sorted(look_schedule(first_round(config), config.max_rounds))
    assert looks[0] == 11 and looks[-1] == config.max_rounds
    assert all(b / a <= 1.25 for a, b in itertools.pairwise(looks))
    # Another schedule falls back to Bonferroni over its looks.
    custom = SessionConfig(max_rounds=60)
    assert 1 - look_confidence(custom) == pytest.approx(0.01 / len(look_schedule(8, 60)))


@pytest.mark.slow
def test_the_calibrated_level_keeps_the_overall_error() -> None:
    # The calibration of bench/tune_calibrate.py, rerun small: null sequences of
    # symmetric noise, every scheduled look plus a budget stop.
    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    from tune_calibrate import false_positive_rate

    config = SessionConfig()
    looks = sorted(look_schedule(first_round(config), config.max_rounds))
    looks = sorted({*looks, (looks[0] + looks[1]) // 2})
    diffs = np.random.default_rng(1).standard_normal((20_000, config.max_rounds))
    rate = false_positive_rate(1 - look_confidence(config), looks, diffs)
    assert 0.005 < rate <= 0.011


def test_settled_arms_stop_being_measured() -> None:
    machine = NoisyMachine(seed=6, jitter=0.3, spike_p=0.0, max_load=1.0)
    config = SessionConfig(budget_s=1e9)
    result = run_session(
        machine.arm("base", 0.01),
        [machine.arm("much-faster", 0.005), machine.arm("same", 0.01)],
        config,
        clock=machine.clock,
    )
    assert len(result.arms["much-faster"].samples) == first_round(config) == 11
    assert len(result.arms["same"].samples) > 12


SEEDS = range(100)


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "futility"])
def repeated_runs(request: pytest.FixtureRequest) -> dict[str, collections.Counter[Verdict]]:
    """100 independent sessions of 30 (simulated) seconds on a harshly loaded machine.

    Per step: 20% log-normal jitter, 8% of steps pre-empted for 2-5x their time,
    and a machine-wide load factor jumping between 1x and 2.5x every 0.1-2 s.
    Once as every caller but the search runs them, once with the search's futility
    stop: it must keep both the error rate and the large effects' verdicts.
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
        config = SessionConfig(seed=seed, budget_s=30.0, futility=request.param)
        result = run_session(machine.arm("base", 0.010), arms, config, clock=machine.clock)
        for name, arm in result.arms.items():
            assert arm.comparison is not None
            verdicts[name][arm.comparison.verdict] += 1
    return verdicts


@pytest.mark.slow
def test_knobs_with_no_effect_get_no_significant_difference(repeated_runs) -> None:  # type: ignore[no-untyped-def]
    # Over 200 null comparisons the overall error is promised at 1%; allow 2%.
    null = repeated_runs["none-a"] + repeated_runs["none-b"]
    assert null[Verdict.SAME] >= 0.98 * sum(null.values()), null


@pytest.mark.slow
def test_knobs_with_a_large_effect_get_the_same_verdict_every_time(repeated_runs) -> None:  # type: ignore[no-untyped-def]
    assert repeated_runs["20%-faster"][Verdict.FASTER] >= 0.98 * len(SEEDS), repeated_runs
    assert repeated_runs["25%-slower"][Verdict.SLOWER] >= 0.98 * len(SEEDS), repeated_runs
    assert repeated_runs["20%-faster"][Verdict.SLOWER] == 0
    assert repeated_runs["25%-slower"][Verdict.FASTER] == 0


def test_a_sample_has_at_least_min_steps_however_slow_the_step() -> None:
    machine = NoisyMachine(seed=2, jitter=0.0, spike_p=0.0, max_load=1.0)
    config = SessionConfig(target_sample_s=0.01, min_steps_per_sample=8, min_rounds=8)
    result = run_session(
        machine.arm("base", 0.1), [machine.arm("slow", 1.0)], config, clock=machine.clock
    )
    assert result.baseline.steps_per_sample == 8 == result.arms["slow"].steps_per_sample


def length_revealing_arm(name: str, clock: FakeClock, calls: list[tuple[str, int]]) -> Arm:
    """An arm whose per-step time reveals how many steps its sample held (10 ms + 0.1 ms each)."""

    def run(steps: int) -> None:
        calls.append((name, steps))
        clock.advance(steps * (0.010 + 0.0001 * steps))

    return Arm(name, run)


def test_an_arm_with_a_floor_is_paired_with_baseline_samples_as_long_as_its_own() -> None:
    # A DataLoader trial needs 8 steps a sample; a compute trial in the same session
    # keeps the calibrated count (1 step of 10 ms), and each is paired with a
    # baseline sample of its own length, never a 1-step with an 8-step mean.
    clock, calls = FakeClock(), []
    base = length_revealing_arm("B", clock, calls)
    compute = length_revealing_arm("C", clock, calls)
    loader = length_revealing_arm("L", clock, calls)
    loader.min_steps_per_sample = 8
    config = SessionConfig(warmup_steps=2, min_rounds=6, max_rounds=6, target_sample_s=0.01)
    result = run_session(base, [compute, loader], config, clock=clock)
    c, ell = result.arms["C"], result.arms["L"]
    assert result.baseline.steps_per_sample == 1 == c.steps_per_sample == c.paired_steps
    assert ell.steps_per_sample == 8 == ell.paired_steps
    timed = calls[6:]  # after 2 warm-up steps each
    assert {n for name, n in timed if name == "C"} == {1}
    assert {n for name, n in timed if name == "L"} == {8}
    assert sorted(n for name, n in timed if name == "B") == [1] * 6 + [8] * 6
    # The pairs: the loader arm's partners are the 8-step baseline samples.
    assert list(ell.paired_base.values()) == pytest.approx([0.0108] * 6)
    assert list(c.paired_base.values()) == pytest.approx([0.0101] * 6)
    # The baseline's own samples (its report) are the ones of its own length.
    assert len(result.baseline.samples) == 6
    assert result.baseline.times == pytest.approx([0.0101] * 6)


def test_when_every_arm_has_the_floor_so_does_the_baseline() -> None:
    clock, calls = FakeClock(), []
    loader = length_revealing_arm("L", clock, calls)
    loader.min_steps_per_sample = 8
    config = SessionConfig(warmup_steps=2, min_rounds=3, max_rounds=3, target_sample_s=0.01)
    result = run_session(length_revealing_arm("B", clock, calls), [loader], config, clock=clock)
    assert result.baseline.steps_per_sample == 8 == result.arms["L"].paired_steps
    assert [n for _, n in calls[4:]] == [8] * 6
    assert len(result.baseline.samples) == 3


def thread_switch_session(seed: int, *, settle_s: float) -> Verdict:
    """threads-1 against a 2-thread baseline of the same steady speed (25 ms a step),
    on a machine where 2-thread steps are 1.4x slower for 75 ms after a switch back."""
    machine = ThreadSwitchMachine(seed=seed, jitter=0.05, spike_p=0.02, max_load=1.2)
    base = dataclasses.replace(
        machine.threads_arm("base", 0.025, 2), settle_steps=1, settle_s=settle_s
    )
    one = dataclasses.replace(
        machine.threads_arm("threads-1", 0.025, 1), settle_steps=1, settle_s=settle_s
    )
    result = run_session(base, [one], SessionConfig(seed=seed, budget_s=20.0), clock=machine.clock)
    comparison = result.arms["threads-1"].comparison
    assert comparison is not None
    return comparison.verdict


def test_a_transient_after_a_thread_switch_is_settled_out_not_timed() -> None:
    # One settle step (25 ms) leaves the baseline's timed step inside the 75 ms
    # transient after every threads-1 sample: a knob with no effect looks 1.4x
    # faster. Settling for 0.1 s (4 steps) times the steady step on both sides.
    seeds = range(10)
    one_step = collections.Counter(thread_switch_session(s, settle_s=0.0) for s in seeds)
    settled = collections.Counter(thread_switch_session(s, settle_s=0.1) for s in seeds)
    assert one_step[Verdict.FASTER] == len(seeds), one_step
    assert settled[Verdict.SAME] == len(seeds), settled


def test_settle_seconds_become_steps_of_the_arms_own_length() -> None:
    clock, log = FakeClock(), []
    fast = dataclasses.replace(recording_arm("fast", clock, log, 0.01), settle_s=0.1)
    slow = dataclasses.replace(recording_arm("slow", clock, log, 0.5), settle_s=0.1)
    config = SessionConfig(warmup_steps=2, min_rounds=2, max_rounds=2, target_sample_s=0.01)
    result = run_session(fast, [slow], config, clock=clock)
    assert result.baseline.settle_steps == 10  # 0.1 s of 10 ms steps
    assert result.arms["slow"].settle_steps == 1  # one step already lasts 0.5 s
    # Each round: the baseline's 10 settle steps and its sample of one, then the arm's 1 + 1.
    rounds = log[4:]
    assert rounds == (["fast"] * 11 + ["slow"] * 2) * 2


#: Log ratios of one round each: ten within 3%, and one sample pre-empted (+25%).
#: At the first look (11 pairs, 99.88%) the interval runs from the smallest to the
#: largest: wide above 1, narrow below.
SKEWED = [-0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03, -0.015, 0.015, 0.005, 0.25]


def scripted_arm(name: str, clock: FakeClock, seconds: float, logs: list[float]) -> Arm:
    """Steps of ``seconds`` times ``exp(logs[i])`` for its i-th sample, cycling; warm-up plain."""
    state = {"calls": 0}

    def run(steps: int) -> None:
        call = state["calls"] - 3  # the 3 warm-up steps take the plain time
        factor = math.exp(logs[call % len(logs)]) if call >= 0 else 1.0
        clock.advance(steps * seconds * factor)
        state["calls"] += 1

    return Arm(name, run)


def futility_session(futility: bool, shift: float, spread: float = 1.0) -> ArmResult:
    """One arm of ``SKEWED`` log ratios, their small ones ``spread`` times as wide, shifted."""
    clock = FakeClock()
    logs = [shift + d * (spread if abs(d) < 0.1 else 1.0) for d in SKEWED]
    arm = scripted_arm("arm", clock, 0.01, logs)
    config = SessionConfig(budget_s=1e9, max_rounds=40, futility=futility)
    result = run_session(scripted_arm("B", clock, 0.01, [0.0]), [arm], config, clock=clock)
    return result.arms["arm"]


@pytest.mark.parametrize(("slowdown", "spread"), [(1.0, 1.0), (1.04, 2.0)])
def test_futility_stops_an_arm_that_cannot_be_usefully_faster(
    slowdown: float, spread: float
) -> None:
    # A null arm and a 4%-slower one (with noise wide enough to leave 1 in its
    # interval): intervals from 0.97-0.98 up to 1.28-1.34, so neither "faster", nor
    # "slower", nor settled as no effect, and without futility measured on. The
    # futility level's 90% intervals (0.99-1.02, 1.02-1.09) rule out both a 5%
    # speedup and a 10% slowdown.
    stopped = futility_session(True, math.log(slowdown), spread)
    assert len(stopped.samples) == first_round(SessionConfig()) == 11
    assert stopped.comparison is not None and stopped.comparison.settled
    assert stopped.comparison.verdict is Verdict.SAME
    assert 1 / 1.05 <= stopped.comparison.ci_low < 1 < stopped.comparison.ci_high
    assert len(futility_session(False, math.log(slowdown), spread).samples) > 11


def test_futility_keeps_measuring_an_arm_that_may_be_much_slower() -> None:
    # 6% slower: the 90% interval (1.04-1.11) still reaches a 10% slowdown, so the
    # arm is measured on towards its "slower" rather than stopped at a lucky look.
    slower = futility_session(True, math.log(1.06), 2.0)
    assert len(slower.samples) > 11


def test_futility_keeps_measuring_an_arm_that_may_be_usefully_faster() -> None:
    # 15% faster: the first look's interval still includes 1 (the pre-empted
    # sample) and reaches far below 1/1.05, so the arm is measured to "faster".
    faster = futility_session(True, -math.log(1.15))
    assert len(faster.samples) > 11
    assert faster.comparison is not None and faster.comparison.verdict is Verdict.FASTER


def test_alternate_rounds_share_an_end_and_skip_the_settle_seconds() -> None:
    # Arms that declare their process state: B a | a B | B a ... and the 0.1 s of
    # settle steps only before a sample whose state differs from the one before it.
    clock, log = FakeClock(), []
    base = dataclasses.replace(
        recording_arm("B", clock, log), settle_steps=1, settle_s=0.05, process_state=2
    )
    one = dataclasses.replace(
        recording_arm("a", clock, log), settle_steps=1, settle_s=0.05, process_state=1
    )
    config = SessionConfig(warmup_steps=1, min_rounds=4, max_rounds=4, target_sample_s=0.01)
    result = run_session(base, [one], config, clock=clock)
    switched, same = ["B"] * 6, ["B"] * 2  # 5 settle steps (0.05 s) + 1, or 1 + 1
    a_switched, a_same = ["a"] * 6, ["a"] * 2
    assert log[2:] == [
        *switched,  # round 1: B a (nothing known before it)
        *a_switched,
        *a_same,  # round 2: a B
        *switched,
        *same,  # round 3: B a
        *a_switched,
        *a_same,  # round 4: a B
        *switched,
    ]
    assert result.arms["a"].settle_steps == 5 and result.arms["a"].same_state_settle_steps == 1
    # Each arm sample is still paired with the baseline sample right beside it.
    assert len(result.arms["a"].samples) == 4


@pytest.mark.parametrize("seed", range(10))
def test_a_thread_switch_is_still_settled_out_when_same_state_samples_skip_it(seed: int) -> None:
    machine = ThreadSwitchMachine(seed=seed, jitter=0.05, spike_p=0.02, max_load=1.2)
    base = dataclasses.replace(
        machine.threads_arm("base", 0.025, 2), settle_steps=1, settle_s=0.1, process_state=2
    )
    one = dataclasses.replace(
        machine.threads_arm("threads-1", 0.025, 1), settle_steps=1, settle_s=0.1, process_state=1
    )
    result = run_session(base, [one], SessionConfig(seed=seed, budget_s=20.0), clock=machine.clock)
    comparison = result.arms["threads-1"].comparison
    assert comparison is not None and comparison.verdict is Verdict.SAME
