"""Interleaved, adaptive timing of several training-step variants ("arms").

One session measures a baseline and any number of arms on the same machine at the
same time:

1. **Warm-up.** Every arm runs ``warmup_steps`` untimed-for-comparison steps. The
   first one is kept apart (it includes ``torch.compile``'s compile, cuDNN's
   autotuning, lazy allocations); the others calibrate how many steps make one
   sample of about ``target_sample_s``, so a sample is long against the timer's
   and the scheduler's granularity.
2. **Rounds.** Each round runs every undecided arm once, in an order shuffled by
   a seeded generator, with a baseline sample between every two arms
   (``B a1 a2 B a3 a4 B``): each arm is paired with the baseline sample right
   next to it, so load that drifts over seconds cancels in the pair's ratio.
   An arm with process-wide settings (threads, TF32) first runs
   ``settle_steps`` untimed, or as many as last ``settle_s`` seconds: a
   transient after a thread count switches back lasts a time, not a step.
   Arms that declare their ``process_state`` (tune: the thread count) pay the
   seconds only after a sample in another state, and every other round runs
   reversed (``B a | a B | B a``), so consecutive rounds meet on a shared end
   and about half the samples of a one-arm session need no such settle.
   An arm whose ``min_steps_per_sample`` raises its samples above the
   baseline's (tune's DataLoader trials) is paired with baseline samples of its
   own length, taken for it (``B a1 a2 B | B' l1``).
3. **Adaptive stopping.** At the looks of a geometric schedule (rounds 11, 13,
   16, 19, ...) each arm is compared with the baseline
   (:func:`torchwise.tune.stats.compare`) at a per-look confidence chosen so
   that all the looks together keep the promised error rate; an arm whose
   verdict is settled stops being measured; with ``futility`` (the search's
   sessions), so does one whose futility interval (90%) rules out a useful
   speedup and a large slowdown. The
   session ends when every arm is settled, after ``max_rounds``, or when the
   next round would overrun the budget (the first look's rounds are always
   completed, so every arm gets a verdict; a session with
   ``first_look_must_fit`` runs none when they would overrun it).

The clock is injected: tests drive sessions with a fake clock and synthetic arms,
so no test verdict depends on wall time.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
import traceback
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from torchwise.tune.stats import Comparison, compare, iqr, median, min_pairs

Clock = Callable[[], float]


@dataclass
class Arm:
    """A variant of the training step to time.

    ``run(steps)`` runs that many steps and returns only when they are done
    (a CUDA step synchronises). ``scope()`` enters and leaves any process-wide
    setting the arm needs around each sample.
    """

    name: str
    run: Callable[[int], None]
    scope: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    settle_steps: int = 0
    #: untimed seconds of steps before each sample (at least ``settle_steps`` of
    #: them), converted to a step count with the arm's warm-up step time: a
    #: transient lasts a time, not a step (tune sets it where arms switch the
    #: thread count; :data:`torchwise.tune.search.THREAD_SWITCH_SETTLE_S`)
    settle_s: float = 0.0
    #: what the arm runs (tune puts its StepSettings here), for reports and tests
    info: object = None
    #: the process-wide state the arm's scope sets (tune: its thread count), or
    #: None for unknown. When set, the ``settle_s`` seconds are only waited out
    #: before a sample that follows one in a different state: after a sample in
    #: the same state there is no switch, so no transient (``settle_steps`` still run)
    process_state: Hashable | None = None
    #: at least this many steps in each of this arm's samples, and in the baseline
    #: samples paired with them (tune: two per worker of a DataLoader trial's loader)
    min_steps_per_sample: int = 1


@dataclass(frozen=True)
class SessionConfig:
    """How hard to try. Defaults suit steps of milliseconds to a second."""

    warmup_steps: int = 3
    min_rounds: int = 8  # raised to what the per-look confidence needs (11 at 99%)
    max_rounds: int = 150
    budget_s: float = 30.0
    target_sample_s: float = 0.01
    max_steps_per_sample: int = 64
    #: at least this many steps a sample, however slow a step, for every arm (the
    #: loader scan needs several batches per worker to time throughput, not one
    #: arrival); :attr:`Arm.min_steps_per_sample` raises it for one arm
    min_steps_per_sample: int = 1
    confidence: float = 0.99
    min_effect: float = 0.05
    #: stop measuring an arm once its interval rules out effects larger than this
    equivalence: float = 0.10
    #: also stop measuring an arm once an interval at ``futility_confidence``
    #: rules out both a speedup of ``min_effect`` (it cannot become a useful
    #: "faster") and a slowdown of ``equivalence``: for callers that only
    #: act on "faster" (the search). Such a stop ends the arm's chances of a false
    #: "faster" early, so the calibrated error rate for "faster" still holds; the
    #: verdict is still :func:`~torchwise.tune.stats.compare`'s (see its ``futility``)
    futility: bool = False
    #: the confidence of the futility interval. Stopping for futility never adds a
    #: false "faster", so this need not be the verdicts' level, only high enough
    #: that a useful speedup is rarely stopped before it shows: at 90%, a knob
    #: truly 10% faster essentially never is. The rounds needed go as the square
    #: of the normal quantile (1.64 at 90% against 3.24 at the per-look 99.88%),
    #: so a null knob stops about four times sooner (docs/benchmarks.md).
    futility_confidence: float = 0.90
    #: start no round unless the first look's rounds fit the budget, as estimated
    #: after the warm-up; the session then ends with no verdicts. For a session
    #: that is optional (tune's confirmation of a combination), not for one whose
    #: arms must each get a verdict
    first_look_must_fit: bool = False
    seed: int = 0


@dataclass
class ArmResult:
    """Everything measured for one arm."""

    name: str
    first_step_s: float | None = None
    #: the median warm-up step after the first, which sized the samples
    warm_step_s: float = 0.0
    #: untimed steps before each sample: the arm's ``settle_steps``, or more to
    #: last its ``settle_s``
    settle_steps: int = 0
    #: untimed steps before a sample that follows one in the same process state
    #: (:attr:`Arm.process_state`): the arm's ``settle_steps`` alone
    same_state_settle_steps: int = 0
    steps_per_sample: int = 1
    #: steps in each baseline sample paired with this arm's: the baseline's own
    #: count, or this arm's when its floor raised it above the baseline's
    paired_steps: int = 1
    #: round index -> seconds per step in that round's sample
    samples: dict[int, float] = field(default_factory=dict)
    #: round index -> the baseline's seconds per step measured next to that sample
    paired_base: dict[int, float] = field(default_factory=dict)
    error: str | None = None
    comparison: Comparison | None = None

    @property
    def times(self) -> list[float]:
        return [self.samples[r] for r in sorted(self.samples)]

    @property
    def median_s(self) -> float:
        return median(self.times) if self.samples else math.nan

    @property
    def iqr_s(self) -> tuple[float, float]:
        return iqr(self.times) if self.samples else (math.nan, math.nan)


@dataclass
class SessionResult:
    baseline: ArmResult
    arms: dict[str, ArmResult]
    rounds: int
    elapsed_s: float
    stop_reason: str
    config: SessionConfig


def paired(arm: ArmResult) -> tuple[list[float], list[float]]:
    """The arm's times and the baseline's times measured right beside them."""
    rounds = sorted(arm.samples)
    return [arm.samples[r] for r in rounds], [arm.paired_base[r] for r in rounds]


def _one_line(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


class _Timer:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def time_steps(self, arm: Arm, steps: int, settle: int = 0) -> float:
        """Seconds for ``steps`` steps of ``arm`` inside its scope, after ``settle`` untimed."""
        with arm.scope():
            if settle:
                arm.run(settle)
            start = self.clock()
            arm.run(steps)
            return self.clock() - start


def _warm_up(
    arm: Arm, result: ArmResult, timer: _Timer, config: SessionConfig, base: ArmResult | None
) -> None:
    """Run the warm-up steps and choose how many steps make one of the arm's samples.

    Every arm uses the baseline's ``steps_per_sample``: the mean of 3 steps and the
    mean of 4 have differently skewed distributions when steps are sometimes
    pre-empted, which would bias a rank comparison of two equal arms. Only an
    arm whose steps take over 4x the baseline's gets proportionally fewer, and
    one whose ``min_steps_per_sample`` is higher gets that many (and baseline
    samples as long, see :func:`_pair_lengths`).
    """
    times = [timer.time_steps(arm, 1) for _ in range(max(1, config.warmup_steps))]
    result.first_step_s = times[0]
    steady = times[1:] or times
    result.warm_step_s = max(median(steady), 1e-9)
    if base is None:
        result.steps_per_sample = _calibrate(result.warm_step_s, config)
    else:
        slowdown = result.warm_step_s / base.warm_step_s
        result.steps_per_sample = base.steps_per_sample
        if slowdown > 4:
            fewer = math.floor(base.steps_per_sample * 4 / slowdown)
            result.steps_per_sample = max(1, config.min_steps_per_sample, fewer)
    result.steps_per_sample = max(result.steps_per_sample, arm.min_steps_per_sample)
    wanted = math.ceil(arm.settle_s / result.warm_step_s - 1e-9)
    result.settle_steps = max(arm.settle_steps, wanted)
    result.same_state_settle_steps = (
        arm.settle_steps if arm.process_state is not None else result.settle_steps
    )


def _pair_lengths(base: ArmResult, arms: Sequence[ArmResult]) -> None:
    """Set how long the baseline samples paired with each arm are.

    An arm whose own floor raised its samples above the baseline's is paired
    with baseline samples of its length: per-step means of 8 steps and of 1
    are equally unbiased, but they are skewed differently when steps get
    pre-empted, and the rank test compares their distributions (the reason
    every arm shares the baseline's count in the first place). The other arms
    keep pairing with samples of the baseline's own count. When every arm was
    raised, the baseline's own count becomes the smallest of theirs, so its
    own samples (its median, its report) are still the ones most arms pair with.
    """
    if arms:
        base.steps_per_sample = min(max(r.steps_per_sample, base.steps_per_sample) for r in arms)
    for result in arms:
        result.paired_steps = max(result.steps_per_sample, base.steps_per_sample)


def _calibrate(per_step_s: float, config: SessionConfig) -> int:
    wanted = math.ceil(config.target_sample_s / max(per_step_s, 1e-9) - 1e-9)
    return max(1, config.min_steps_per_sample, min(config.max_steps_per_sample, wanted))


def run_session(
    baseline: Arm,
    arms: Sequence[Arm],
    config: SessionConfig = SessionConfig(),
    *,
    clock: Clock = time.perf_counter,
    on_round: Callable[[int], None] | None = None,
) -> SessionResult:
    """Measure ``arms`` against ``baseline``, interleaved, until settled or out of budget.

    An arm that raises is recorded with its error and leaves the session; the
    baseline raising is re-raised (nothing can be compared without it).
    """
    timer = _Timer(clock)
    rng = random.Random(config.seed)
    start = clock()
    base_result = ArmResult(baseline.name)
    _warm_up(baseline, base_result, timer, config, None)
    results: dict[str, ArmResult] = {}
    active: list[Arm] = []
    for arm in arms:
        result = results[arm.name] = ArmResult(arm.name)
        try:
            _warm_up(arm, result, timer, config, base_result)
        except Exception as exc:  # a knob that breaks the step is a result, not a crash
            result.error = _one_line(exc)
            continue
        active.append(arm)

    _pair_lengths(base_result, [results[a.name] for a in active])
    rounds, stop_reason = 0, "every arm settled" if active else "no arm to compare"
    first_look = first_round(config)
    looks = look_schedule(first_look, config.max_rounds)
    round_cost = _round_cost(base_result, [results[a.name] for a in active])
    # Alternate the rounds' direction only where it saves settles; other sessions
    # keep their order.
    alternate = any(a.process_state is not None for a in [baseline, *active])
    previous: Hashable | None = None  # the state of the last sample; None: unknown
    first_look_s = first_look * round_cost
    if active and config.first_look_must_fit and clock() - start + first_look_s > config.budget_s:
        stop_reason = (
            f"its first look would take about {first_look_s:.1f} s ({first_look} rounds), "
            f"more than the {config.budget_s:.1f} s of budget it had"
        )
        active = []
    while active:
        elapsed = clock() - start
        if rounds >= config.max_rounds:
            stop_reason = f"reached {config.max_rounds} rounds"
            break
        if rounds >= first_look and elapsed + round_cost > config.budget_s:
            stop_reason = f"time budget of {config.budget_s:g} s"
            break
        rng.shuffle(active)
        round_start = clock()
        groups = _by_pair_length(active, results)
        backwards = alternate and rounds % 2 == 1
        for base_steps, group in reversed(groups) if backwards else groups:
            sequence = _round_sequence(group)
            if backwards:
                # B a2 a1 B: still each arm next to a baseline sample, and this
                # round starts where the last one ended (B a | a B | B a).
                sequence.reverse()
            measured: list[float | None] = []
            for member in sequence:
                result = base_result if member is None else results[member.name]
                arm = baseline if member is None else member
                steps = base_steps if member is None else result.steps_per_sample
                same_state = arm.process_state is not None and arm.process_state == previous
                settle = result.same_state_settle_steps if same_state else result.settle_steps
                previous = None  # unknown until the sample has run
                try:
                    seconds = timer.time_steps(arm, steps, settle)
                except Exception as exc:
                    if member is None:
                        raise
                    result.error = _one_line(exc)
                    measured.append(None)
                    continue
                previous = arm.process_state
                measured.append(seconds / steps)
                if member is None and steps == base_result.steps_per_sample:
                    base_result.samples[len(base_result.samples)] = measured[-1]  # type: ignore[assignment]
            for position, member in enumerate(sequence):
                if member is None or measured[position] is None:
                    continue
                before = position > 0 and sequence[position - 1] is None
                partner = position - 1 if before else position + 1
                result = results[member.name]
                result.samples[rounds] = measured[position]  # type: ignore[assignment]
                result.paired_base[rounds] = measured[partner]  # type: ignore[assignment]
        round_cost = clock() - round_start
        rounds += 1
        active = [a for a in active if results[a.name].error is None]
        if rounds in looks:
            active = [a for a in active if not _settled(results[a.name], config)]
        if on_round is not None:
            on_round(rounds)

    for result in results.values():
        if result.error is None and result.samples:
            arm_t, base_t = paired(result)
            result.comparison = compare(
                arm_t,
                base_t,
                confidence=look_confidence(config),
                min_effect=config.min_effect,
                equivalence=config.equivalence,
                futility=config.futility_confidence if config.futility else None,
            )
    return SessionResult(base_result, results, rounds, clock() - start, stop_reason, config)


def _by_pair_length(
    arms: Sequence[Arm], results: dict[str, ArmResult]
) -> list[tuple[int, list[Arm]]]:
    """The arms grouped by the length of their paired baseline samples, in order.

    Each group gets its own ``B a1 a2 B ...`` sequence with baseline samples of
    that length; groups come in the order of their first arm in ``arms`` (shuffled
    each round). Without per-arm floors there is one group: the plain sequence.
    """
    groups: dict[int, list[Arm]] = {}
    for arm in arms:
        groups.setdefault(results[arm.name].paired_steps, []).append(arm)
    return list(groups.items())


def _round_sequence(arms: Sequence[Arm]) -> list[Arm | None]:
    """One round's order, ``None`` standing for the baseline: B a1 a2 B a3 a4 B a5.

    Every arm runs right next to a baseline sample and is paired with it (a1 and
    a3 with the one before, a2 and a4 with the one after); a baseline sample
    serves the arm on each side. That costs n + n//2 + 1 samples a round instead
    of the 2n of separate pairs, with the same adjacency. The arms come shuffled,
    so over the rounds each runs before and after its baseline alike.
    """
    sequence: list[Arm | None] = []
    for index in range(0, len(arms), 2):
        sequence.append(None)
        sequence.extend(arms[index : index + 2])
    if len(arms) % 2 == 0 and arms:
        sequence.append(None)
    return sequence


def look_schedule(first: int, last: int, growth: float = 1.2) -> frozenset[int]:
    """The round counts after which arms are tested: ``first``, then about 20% apart.

    Testing after every round would give a null arm dozens of chances to look
    significant by luck; a geometric schedule keeps the number of looks
    logarithmic in the rounds run (about 16 looks up to 150 rounds).
    """
    looks, n = set(), float(first)
    while round(n) < last:
        looks.add(round(n))
        n = max(n * growth, round(n) + 1)
    looks.add(last)
    return frozenset(looks)


#: Per-look error rates calibrated by simulation (bench/tune_calibrate.py) for
#: (overall confidence, max_rounds) with looks from round 11 growing by 1.2: the
#: largest per-look level at which all looks together, plus a final one at a
#: budget stop, reject a null arm at most 1 - confidence of the time. The
#: signed-rank test is distribution-free for symmetric noise, so one simulation
#: holds for any such noise. 0.0012 is 2.2x Bonferroni's 0.01 / 18.
CALIBRATED_LOOK_ALPHA: dict[tuple[float, int], float] = {(0.99, 150): 0.0012}
CALIBRATED_FIRST_LOOK = 11


def look_confidence(config: SessionConfig) -> float:
    """The confidence of each look, so that all looks together err with at most 1 - confidence.

    The calibrated level when the schedule is the calibrated one (the default:
    99.88% per look for 99% overall); otherwise Bonferroni over the looks,
    conservative but free of assumptions (18 looks at 99% overall: 99.94%).
    """
    calibrated = CALIBRATED_LOOK_ALPHA.get((config.confidence, config.max_rounds))
    if calibrated is not None and config.min_rounds <= CALIBRATED_FIRST_LOOK:
        return 1 - calibrated
    looks = len(look_schedule(config.min_rounds, config.max_rounds))
    return 1 - (1 - config.confidence) / looks


def first_round(config: SessionConfig) -> int:
    """``min_rounds``, raised to the fewest pairs for which a per-look interval exists."""
    return max(config.min_rounds, min_pairs(look_confidence(config) - 1e-12))


def _settled(result: ArmResult, config: SessionConfig) -> bool:
    arm_t, base_t = paired(result)
    level = look_confidence(config)
    return compare(
        arm_t,
        base_t,
        confidence=level,
        min_effect=config.min_effect,
        equivalence=config.equivalence,
        futility=config.futility_confidence if config.futility else None,
    ).settled


def _round_cost(base: ArmResult, others: Sequence[ArmResult]) -> float:
    """Seconds the first round should take, from the warm-up; later rounds use the last.

    Each group of arms sharing a paired length costs its arms' samples plus
    ``n // 2 + 1`` baseline samples of that length (:func:`_round_sequence`),
    each sample after its untimed settle steps (all of them: an upper bound where
    samples in the same process state skip some).
    """
    lengths: dict[int, int] = {}
    for r in others:
        lengths[r.paired_steps] = lengths.get(r.paired_steps, 0) + 1
    if not lengths:
        lengths[base.steps_per_sample] = 0
    baseline_s = sum(
        (n // 2 + 1) * (steps + base.settle_steps) * base.warm_step_s
        for steps, n in lengths.items()
    )
    return baseline_s + sum((r.steps_per_sample + r.settle_steps) * r.warm_step_s for r in others)
