"""Which knobs to recommend: checked, measured, and combined greedily.

1. **The thread count first.** It changes every other knob's timing, and on a
   busy machine two OpenMP threads can make each op wait at a barrier for a
   pre-empted peer (steps 20x slower were measured), drowning any other effect
   in noise. So the ``threads-N`` knobs are measured alone first. A session
   whose arms run different thread counts settles for
   :data:`THREAD_SWITCH_SETTLE_S` of untimed steps before each sample, not one
   step, and times samples at least that long: the steps right after a switch
   back to two threads are slow for a time.
2. **Stages.** Each knob is applied to a fresh private copy on top of the
   knobs accepted so far (the *incumbent*), checked for correctness against
   the original baseline (:mod:`torchwise.tune.checks`), and timed against the
   incumbent in one interleaved session. The knob with the largest significant
   speedup is accepted into the incumbent; the knobs still undecided (faster
   ones, whose gains may overlap with it, and ones the noise left open) are
   measured again on top of it. Repeat while something is still faster; at
   most one knob per group, at most ``max_stages`` stages.
3. **Reopening diluted knobs.** A "no significant difference" is settled
   relative to the step it was measured on: its interval bounds the knob's
   saving in seconds (the interval's low end below 1, times that step). When an
   accepted knob makes the step much shorter (a loader fix on an input-bound
   step), a saving too small to matter on the old step can be a useful share of
   the new one; each settled knob whose bound, over the new incumbent's step,
   exceeds the gain the settling rule ruled out is measured again on top of it
   (:meth:`Search._reopen`). A knob with no effect gets an interval tight around
   1 on the new step and stays settled unless the step shrinks as much again.
   Knobs that change the same part of the step (:attr:`Knob.phase`: the
   optimizer's update and how ``zero_grad`` leaves the gradients it reads) need
   not add up, so accepting one reopens the others of its phase, once each. A
   loader knob that adds worker processes reopens the thread count, once, for a
   stage of its own (:meth:`Search._threads_again`): the workers compete with
   the step's threads for the cores.
4. **Confirmation.** With two or more accepted knobs, the final combination is
   measured against the original baseline: that is the gain the report promises.
   It runs only if its first look fits what is left of the budget; otherwise
   the report says the combination was not measured, and why.

Otherwise a knob whose "slower" or "no significant difference" verdict was
settled (its interval excluded a useful gain) is not retried; memory knobs
(activation checkpointing) are measured once for their time and memory cost and
reported as trade-offs, never accepted as speedups.
"""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from torchwise.tune.checks import CheckResult, Reference, check_knob
from torchwise.tune.knobs import SPEED, Knob, Tolerance
from torchwise.tune.memory import StepMemory, live_training_state, measure_step_memory
from torchwise.tune.session import (
    Arm,
    ArmResult,
    SessionConfig,
    SessionResult,
    first_round,
    run_session,
)
from torchwise.tune.stats import Comparison, Verdict, median
from torchwise.tune.step import StepSettings, TrainingStep, Workload, time_limit

Notify = Callable[[str], None]


@dataclass
class Trial:
    """One knob measured in one stage, on top of the knobs accepted before it."""

    knob: Knob
    stage: int
    on_top_of: tuple[str, ...]
    check: CheckResult | None = None
    error: str | None = None
    first_step_s: float | None = None
    result: ArmResult | None = None
    baseline: ArmResult | None = None
    memory: StepMemory | None = None
    accepted: bool = False
    #: why a knob settled earlier is measured again in this stage (see
    #: :meth:`Search._reopen`), None for a first measurement or an undecided knob
    reopened: str | None = None

    @property
    def comparison(self) -> Comparison | None:
        return self.result.comparison if self.result is not None else None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "failed"
        if self.check is not None and not self.check.ok:
            return "incorrect"
        if self.comparison is None:
            return "not measured"
        return self.comparison.verdict.value

    @property
    def timed(self) -> bool:
        """Whether the knob ran and was timed: it has a verdict, of whatever kind."""
        return self.status not in ("failed", "incorrect", "not measured")


@dataclass
class Stage:
    index: int
    incumbent: tuple[str, ...]
    session: SessionResult | None
    trials: list[Trial]
    baseline_memory: StepMemory | None = None


@dataclass
class SearchResult:
    stages: list[Stage]
    accepted: list[Trial]
    confirmation: SessionResult | None
    elapsed_s: float

    @property
    def combined(self) -> Comparison | None:
        """The accepted knobs together against the original baseline, when measured."""
        if self.confirmation is not None:
            return next(iter(self.confirmation.arms.values())).comparison
        return self.accepted[0].comparison if len(self.accepted) == 1 else None

    @property
    def combined_not_measured(self) -> str | None:
        """Why two or more accepted knobs were not timed together against the baseline."""
        if len(self.accepted) < 2 or self.combined is not None:
            return None
        if self.confirmation is None:
            return "no confirmation session ran"
        combined = next(iter(self.confirmation.arms.values()))
        if combined.error is not None:
            return f"the combination broke the step: {combined.error}"
        return self.confirmation.stop_reason


@dataclass(frozen=True)
class SearchConfig:
    budget_s: float = 60.0
    session: SessionConfig = field(default_factory=SessionConfig)
    compile_budget_s: float | None = 300.0
    train_mode: bool = True
    seed: int = 0
    max_stages: int = 5


def settings_for(knobs: Sequence[Knob]) -> StepSettings:
    settings = StepSettings()
    for knob in knobs:
        settings = settings.merged(**knob.changes)
    return settings


#: Groups measured before all others: the thread count changes every other
#: knob's timing (and, on a busy machine, its noise), so the rest are measured
#: on top of the best thread count.
FIRST_GROUPS = frozenset({"threads"})


def _faster(trial: Trial) -> bool:
    c = trial.comparison
    return trial.error is None and c is not None and c.verdict is Verdict.FASTER


def _decided(trial: Trial) -> bool:
    """Whether measuring the knob again, on any baseline, is pointless.

    Broken knobs, memory knobs (measured once for their trade-off), and knobs
    whose "slower" or "no significant difference" verdict was settled (the
    interval excluded a useful gain); a faster knob stays pending so it is
    measured again on top of what gets accepted, and so does one left
    undecided by the noise or the budget.
    """
    if not trial.timed or trial.knob.kind != SPEED:
        return True
    c = trial.comparison
    return c is not None and c.settled and c.verdict is not Verdict.FASTER


def loosest(knobs: Sequence[Knob]) -> Tolerance:
    """The tolerance of a combination: bf16 plus a fused optimizer drifts like bf16."""
    tolerances = [k.tolerance for k in knobs]
    widest = max(tolerances, key=lambda t: t.loss_rtol)
    return Tolerance(widest.loss_rtol, max(t.update_rtol for t in tolerances), widest.why)


def _one_line(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


class Settle(NamedTuple):
    """Untimed work before each sample of a session: steps, and seconds of steps."""

    steps: int = 0
    seconds: float = 0.0


#: Untimed seconds before each sample of a session whose arms run different thread
#: counts. On the 2-core development machine, the slow-loader MLP's second
#: 2-thread step after one-thread steps was over 1.25x the usual in 16 of 30
#: cases, against 6 of 30 after 2-thread steps, and no more often than that from
#: the fourth step (75 ms) on; with ``OMP_WAIT_POLICY=PASSIVE`` none was (OpenMP's
#: spin-waiting pool, not the work). One settle step timed that transient: threads-1
#: read 0.79-0.84 of two threads in tune's session, 0.98-1.01 after 0.1 s of settle
#: steps (bench/tune_threads_ab.py, other processes idle).
THREAD_SWITCH_SETTLE_S = 0.1


def _settle(settings: Sequence[StepSettings]) -> Settle:
    """The settle every arm of a session gets for the process-wide settings in it.

    Changing the thread count (or TF32) between samples costs the next step a
    pool resize, whichever arm runs it: one step for all. Only sessions whose
    arms really run different thread counts get the time: with every arm on the
    incumbent's count there is no transient to wait out. A DataLoader's drain is
    the arm's own (:func:`_drain_steps`).
    """
    process_wide = any(s.threads is not None or s.tf32 or s.cudnn_benchmark for s in settings)
    counts = {s.threads or torch.get_num_threads() for s in settings}
    return Settle(int(process_wide), THREAD_SWITCH_SETTLE_S if len(counts) > 1 else 0.0)


def _drain_steps(settings: StepSettings) -> int:
    """Untimed steps an arm's own loader needs before a sample: its prefetch queue, drained.

    A loader arm finds its queue full after the other arms' samples (batches the
    workers made meanwhile would time as speed). An arm on a 0-worker loader has
    no queue: it does not pay for its neighbour's. Before, every arm of a session
    with a 4-worker trial ran 9 untimed steps a sample: on the slow-loader MLP,
    about 0.2 s of the 0.25 s of each compute knob's sample.
    """
    return settings.loader.queue_depth + 1 if settings.loader is not None else 0


def steps_per_loader_sample(workload: Workload, settings: Sequence[StepSettings]) -> list[int]:
    """The fewest steps in a sample of each arm, in a session where some arm changes the loader.

    Two batches per worker of the arm's own loader (its trial's, else the
    user's), as in the loader scan (:mod:`torchwise.tune.loader_scan`): after the
    untimed settle steps drain the prefetch queue, the workers are in phase and
    the next batches arrive together, so a one-step sample times that burst or
    the wait after it, not the rate the workers deliver at (one such 37 ms sample
    among 11 hid a 4-worker loader's gain on the MLP of bench/tune_accuracy.py).

    An arm on a 0-worker loader gets no floor: it has no prefetch queue, each
    step loads its own batch, so one step already times the steady rate. That
    holds for the baseline too; the baseline samples paired with a loader arm
    are nevertheless as long as the loader arm's, for the statistics (equally
    long means are equally skewed; :func:`torchwise.tune.session._pair_lengths`).
    So with a 0-worker baseline only the loader arms and their paired baseline
    samples are long; the compute arms keep their calibrated count (before,
    every arm of the session took the floor: 8 steps of 30 ms a sample for the
    compute knobs of the slow-loader MLP, and tune overran its budget by half).
    On top of an accepted loader with workers every arm runs that loader, and
    every arm gets its floor.
    """
    if not any(s.loader is not None for s in settings):
        return [1] * len(settings)
    user = workload.loader.user_settings if workload.loader is not None else None
    floors = []
    for s in settings:
        loader = s.loader or user
        floors.append(max(1, 2 * loader.num_workers) if loader is not None else 1)
    return floors


def _session_config(
    base: SessionConfig, *, budget_s: float, seed: int, settle: Settle, futility: bool = False
) -> SessionConfig:
    """The session's config; samples at least as long as a settle where arms settle for seconds.

    A switch's transient need not end with the settle: in one measurement on the
    transformer, 2-thread steps after one-thread steps were about 7% slower
    through all 8 steps (95 ms) timed after the switch (in a second, not
    measurably). A 10 ms sample right after the settle times what is left of it
    at full weight; a sample as long as the settle dilutes it. With 10 ms
    samples one of four tune runs on the transformer read ``threads-1`` as
    0.917, "faster", after 141 rounds, where four sweeps read 0.985-1.068; with
    0.1 s samples none of three did (1.027-1.052).
    """
    return dataclasses.replace(
        base,
        budget_s=budget_s,
        seed=seed,
        futility=futility,
        target_sample_s=max(base.target_sample_s, settle.seconds),
    )


#: Share of the remaining budget a loader trial undecided at its stage's end may
#: take for a session of its own (a loader's step times are skewed by batches
#: arriving in bursts, so its interval narrows more slowly than a compute knob's).
LOADER_FOLLOW_UP_SHARE = 0.5


def _process_state(settings: StepSettings) -> tuple[int, bool, bool]:
    """What a step's scope sets process-wide: a sample after one in the same state
    follows no switch, so it needs no settle seconds (:attr:`Arm.process_state`)."""
    threads = settings.threads or torch.get_num_threads()
    return threads, settings.tf32, settings.cudnn_benchmark


def _arm(name: str, step: TrainingStep, settle: Settle, min_steps: int = 1) -> Arm:
    return Arm(
        name,
        step.run,
        step.scope,
        settle.steps,
        settle_s=settle.seconds,
        info=step.settings,
        min_steps_per_sample=min_steps,
        # Only a session that settles for seconds has anything to save by knowing
        # the state; the others keep their plain order.
        process_state=_process_state(step.settings) if settle.seconds else None,
    )


def _arms(
    workload: Workload, named: Sequence[tuple[str, TrainingStep]], settle: Settle
) -> tuple[Arm, list[Arm]]:
    """The baseline (first) and the other arms, each with its own loader floor and drain."""
    floors = steps_per_loader_sample(workload, [step.settings for _, step in named])
    arms = [
        _arm(
            name,
            step,
            settle._replace(steps=max(settle.steps, _drain_steps(step.settings))),
            floor,
        )
        for (name, step), floor in zip(named, floors, strict=True)
    ]
    return arms[0], arms[1:]


SessionRunner = Callable[[Arm, list[Arm], SessionConfig], SessionResult]


def _memory(step: TrainingStep) -> StepMemory | None:
    try:
        with step.scope():
            step.zero_grad()
            return measure_step_memory(
                step.step, step.device, lambda: live_training_state(step.module, step.optimizer)
            )
    except Exception:  # memory is evidence, not a gate: a failing probe leaves it out
        return None


@dataclass(frozen=True)
class Diluted:
    """A knob settled as "no significant difference", and what its interval still allows.

    ``saving_s`` is the most a step could have saved by it, per its interval: the
    interval's low end below 1 times the step it was measured on.
    """

    knob: Knob
    saving_s: float
    step_s: float


def _saving_bound(trial: Trial) -> Diluted | None:
    """What a settled "no significant difference" leaves open, or None for other verdicts."""
    c, result = trial.comparison, trial.result
    if (
        c is None
        or result is None
        or trial.error is not None
        or trial.knob.kind != SPEED
        or trial.knob.group in FIRST_GROUPS
        or not c.settled
        or c.verdict is not Verdict.SAME
        or not result.paired_base
    ):
        return None
    # The interval that settled it: a futility stop's, at its own level, bounds
    # the speedup left (the verdict's wider interval was not what stopped it).
    low = c.futility_low if c.futility_low is not None else c.ci_low
    if low >= 1:
        return None
    step_s = median(list(result.paired_base.values()))
    return Diluted(trial.knob, (1 - low) * step_s, step_s)


def added_workers(workload: Workload, knob: Knob) -> int:
    """Loader worker processes a knob adds to the user's loader (0 for other knobs)."""
    loader = knob.changes.get("loader")
    if loader is None:
        return 0
    user = workload.loader.user_settings.num_workers if workload.loader is not None else 0
    return max(0, int(loader.num_workers) - user)


def _stage_share(candidates: Sequence[Knob], pending: Sequence[Knob]) -> float:
    """The thread stage's share of the remaining budget: its knobs' share of those pending.

    Between 15% and 35%, and 60% when nothing else is waiting. A thread count
    within a few percent of another is the slowest knob to settle on a noisy
    machine (each pair is a settle apart), and at a fixed 35% it took 10-15 s of
    a 60 s budget on the transformer, whose other five knobs then settled in
    5 s together. One thread knob among six pending gets a sixth; a large thread
    effect (two threads 10-90x slower with a job on the other core) still
    settles at the first look.
    """
    if len(candidates) >= len(pending):
        return 0.6
    return min(0.35, max(0.15, len(candidates) / len(pending)))


class Search:
    """Runs the stages; one instance per tune run."""

    def __init__(
        self,
        workload: Workload,
        knobs: Sequence[Knob],
        config: SearchConfig,
        *,
        notify: Notify = lambda _: None,
        clock: Callable[[], float] = time.perf_counter,
        runner: SessionRunner = run_session,
    ) -> None:
        self.workload = workload
        self.knobs = list(knobs)
        self.config = config
        self.notify = notify
        self.clock = clock
        self.runner = runner
        self.reference = Reference(workload)
        self.start = clock()

    def remaining(self) -> float:
        return max(0.0, self.config.budget_s - (self.clock() - self.start))

    def _prepare(
        self, knob: Knob, incumbent: Sequence[Knob], stage: int
    ) -> tuple[Trial, TrainingStep | None]:
        trial = Trial(knob, stage, tuple(k.id for k in incumbent))
        settings = settings_for([*incumbent, knob])
        try:
            # Checked against the incumbent, itself checked against the baseline:
            # the same numerics, and cheap once a faster thread count is in it.
            check_base = TrainingStep(self.workload, settings_for(incumbent))
            step = TrainingStep(self.workload, settings)
            budget = self.config.compile_budget_s if settings.compile else None
            started = time.perf_counter()
            with time_limit(budget, "torch.compile's first step"):
                trial.check = check_knob(
                    self.reference,
                    check_base,
                    step,
                    loosest([*incumbent, knob]),
                    train=self.config.train_mode,
                    seed=self.config.seed,
                    steps=knob.check_steps,
                )
            trial.first_step_s = time.perf_counter() - started
        except Exception as exc:  # a knob that breaks the step is a result, not a crash
            trial.error = _one_line(exc)
            if settings.compile:
                torch.compiler.reset()
            return trial, None
        if not trial.check.ok:
            return trial, None
        return trial, step

    def run_stage(
        self, stage: int, incumbent: Sequence[Knob], knobs: Sequence[Knob], budget_s: float
    ) -> Stage:
        label = " + ".join(k.id for k in incumbent) or "baseline"
        self.notify(f"stage {stage}: {len(knobs)} knob(s) against {label}")
        trials, steps = [], {}
        for knob in knobs:
            self.notify(f"  checking {knob.id}")
            trial, step = self._prepare(knob, incumbent, stage)
            trials.append(trial)
            if step is not None:
                steps[knob.id] = step
        base_step = TrainingStep(self.workload, settings_for(incumbent))
        all_settings = [base_step.settings] + [s.settings for s in steps.values()]
        settle = _settle(all_settings)
        session = None
        if steps:
            self.notify(f"  timing {len(steps)} arm(s), interleaved, for up to {budget_s:.0f} s")
            # The search acts only on "faster": an arm that cannot be usefully
            # faster is done (futility), which leaves the budget to the others.
            config = _session_config(
                self.config.session,
                budget_s=budget_s,
                seed=self.config.seed + stage,
                settle=settle,
                futility=True,
            )
            session = self.runner(
                *_arms(self.workload, [("baseline", base_step), *steps.items()], settle), config
            )
            for trial in trials:
                if trial.knob.id in session.arms:
                    result = session.arms[trial.knob.id]
                    trial.result, trial.baseline = result, session.baseline
                    if result.error is not None:
                        trial.error = result.error
                    trial.memory = _memory(steps[trial.knob.id])
            self._follow_up_loader_trials(stage, trials, steps, base_step, settle, session)
        return Stage(stage, tuple(k.id for k in incumbent), session, trials, _memory(base_step))

    def _follow_up_loader_trials(
        self,
        stage: int,
        trials: Sequence[Trial],
        steps: dict[str, TrainingStep],
        base_step: TrainingStep,
        settle: Settle,
        session: SessionResult,
    ) -> None:
        """More rounds, within the budget, for loader trials the stage left undecided.

        They are timed again against the incumbent in a session of their own, whose
        verdict replaces the stage's: pooling the stage's rounds with it would let
        the new session stop on its own pairs while the pooled interval stays open.
        A second session is a second chance at a false "faster", so a loader
        trial errs at most twice the session's rate (2% at the default 99%).
        """
        undecided = [
            t
            for t in trials
            if t.knob.changes.get("loader") is not None
            and t.result is not None
            and t.error is None
            and t.comparison is not None
            and not t.comparison.settled
        ]
        if not undecided:
            return
        budget_s = self.remaining() * LOADER_FOLLOW_UP_SHARE
        # A fresh session always completes its first look: only start one that fits.
        round_s = session.elapsed_s / max(session.rounds, 1)
        if budget_s < first_round(session.config) * round_s:
            return
        self.notify(f"  {len(undecided)} loader trial(s) undecided: more rounds")
        config = dataclasses.replace(
            session.config, budget_s=budget_s, seed=self.config.seed + 50 + stage
        )
        named = [("baseline", base_step), *((t.knob.id, steps[t.knob.id]) for t in undecided)]
        more = self.runner(*_arms(self.workload, named, settle), config)
        for trial in undecided:
            if trial.knob.id in more.arms:
                trial.result, trial.baseline = more.arms[trial.knob.id], more.baseline
                trial.error = trial.result.error

    def _reopen(self, diluted: dict[str, Diluted], best: Trial, groups: set[str]) -> dict[str, str]:
        """The settled knobs worth measuring again on top of ``best``, and why.

        A "no significant difference" is settled relative to the step it was
        measured on: its interval rules out a useful gain *there*. A knob that
        saves a fixed time per step (a faster optimizer update) is diluted on a
        step dominated by something else (a 20 ms wait for the loader) and
        undiluted once that is removed: fused AdamW's 2.5% of the slow-loader
        MLP's 24 ms step was about 8% of its 5 ms step with 4 workers. So when a
        knob is accepted, each settled knob's largest possible saving, in
        seconds, is set against the new incumbent's step; where it could exceed
        the gain the settling rule ruled out, the knob is measured again. One
        whose saving is truly nil gets an interval tight around 1 on the new step
        as well, and is not reopened again unless the step shrinks again as much;
        ``max_stages`` and the budget bound the rest.
        """
        result = best.result
        if result is None or not result.samples:
            return {}
        new_step_s = result.median_s
        session = self.config.session
        useful = 1 - 1 / (1 + max(session.equivalence, session.min_effect))
        reasons = {}
        phase = best.knob.phase
        for knob_id, d in diluted.items():
            if d.knob.group in groups:
                continue
            if phase and d.knob.phase == phase:
                # Same code path: a knob that did nothing alone may do something
                # with the accepted one (in a 30-round sweep of the conv net,
                # in-place zero_grad was 1.045 alone and 0.87 on top of fused AdamW).
                reasons[knob_id] = (
                    f"settled as no significant difference without {best.knob.id}, "
                    f"which changes the same part of the step ({phase}): effects there "
                    "need not add up"
                )
                continue
            possible = d.saving_s / new_step_s
            if possible > useful:
                reasons[knob_id] = (
                    f"settled as no significant difference on a {d.step_s * 1e3:.3g} ms step, "
                    f"its interval allows up to {d.saving_s * 1e3:.2g} ms a step, "
                    f"{possible:.0%} of the {new_step_s * 1e3:.3g} ms step with {best.knob.id}"
                )
        return reasons

    def _threads_again(
        self, measured: dict[str, Knob], best: Trial, groups: set[str]
    ) -> dict[str, str]:
        """The thread-count knobs to measure again on top of ``best``, and why.

        A loader knob that adds worker processes gives the step's intra-op
        threads competition for the cores: the thread count measured without
        them no longer holds. On the 2-core development machine one thread was
        no faster than two on the slow-loader MLP alone (0.94-1.01 in tune, 1.010
        in a sweep), and one sweep's fastest setting, in both of its copies, was
        one thread with fused AdamW and the 4-worker loader (tune's pick, two
        threads with the loader, took 1.18x its time). Not every run shows it
        (another sweep read one thread on top of the loader at 1.008), so it is
        measured, once, rather than assumed.
        """
        workers = added_workers(self.workload, best.knob)
        if not workers:
            return {}
        return {
            knob_id: (
                f"measured without {best.knob.id}, whose {workers} worker process(es) "
                f"share the machine's {os.cpu_count() or 1} cores with the step's threads"
            )
            for knob_id, knob in measured.items()
            if knob.group not in groups
        }

    def run(self) -> SearchResult:
        stages: list[Stage] = []
        accepted: list[Trial] = []
        incumbent: list[Knob] = []
        pending = list(self.knobs)
        candidates = [k for k in pending if k.group in FIRST_GROUPS] or pending
        diluted: dict[str, Diluted] = {}
        reopened: dict[str, str] = {}
        #: thread-count knobs measured and not accepted, until reopened (once)
        threads_measured: dict[str, Knob] = {}
        threads_next: list[Knob] = []
        stage_index = 1
        while candidates and stage_index <= self.config.max_stages:
            first_groups_only = all(k.group in FIRST_GROUPS for k in candidates)
            share = _stage_share(candidates, pending) if first_groups_only else 0.6
            stage = self.run_stage(stage_index, incumbent, candidates, self.remaining() * share)
            stages.append(stage)
            for trial in stage.trials:
                trial.reopened = reopened.pop(trial.knob.id, None)
                if trial.knob.group in FIRST_GROUPS and trial.reopened is None and trial.timed:
                    threads_measured[trial.knob.id] = trial.knob
                if _decided(trial):
                    pending.remove(trial.knob)
                    bound = _saving_bound(trial)
                    if bound is not None:
                        diluted[trial.knob.id] = bound
            winners = sorted(
                (t for t in stage.trials if t.knob.kind == SPEED and _faster(t)),
                key=lambda t: t.comparison.ratio if t.comparison else 1.0,
            )
            if winners:
                best = winners[0]
                best.accepted = True
                accepted.append(best)
                incumbent.append(best.knob)
                groups = {k.group for k in incumbent}
                pending = [k for k in pending if k is not best.knob and k.group not in groups]
                for knob_id, why in self._reopen(diluted, best, groups).items():
                    pending.append(diluted.pop(knob_id).knob)
                    reopened[knob_id] = why
                    self.notify(f"  {knob_id} measured again: {why}")
                for knob_id, why in self._threads_again(threads_measured, best, groups).items():
                    knob = threads_measured.pop(knob_id)
                    if knob not in pending:
                        pending.append(knob)
                    threads_next.append(knob)
                    reopened[knob_id] = why
                    self.notify(f"  {knob_id} measured again: {why}")
            elif not first_groups_only:
                break
            # Next: everything still undecided, on top of what was accepted (after
            # the thread count, all the other knobs; after that, the knobs that
            # were faster or that the noise left undecided, and the settled ones
            # whose saving the new, faster incumbent could make useful). A thread
            # count reopened by loader workers goes first, alone, as in stage 1.
            candidates = threads_next or [k for k in pending if k.group not in FIRST_GROUPS]
            threads_next = []
            stage_index += 1
        confirmation = None
        if len(accepted) >= 2:
            self.notify("confirming the combination against the baseline")
            base, combined = (
                TrainingStep(self.workload),
                TrainingStep(self.workload, settings_for(incumbent)),
            )
            settle = _settle([base.settings, combined.settings])
            settle = settle._replace(steps=max(1, settle.steps))
            confirmation = self.runner(
                *_arms(self.workload, [("baseline", base), ("combined", combined)], settle),
                dataclasses.replace(
                    _session_config(
                        self.config.session,
                        budget_s=self.remaining(),
                        seed=self.config.seed + 99,
                        settle=settle,
                    ),
                    # Optional evidence: the budget is the user's promise, and a
                    # session's first look otherwise always runs (11 rounds).
                    first_look_must_fit=True,
                ),
            )
            if confirmation.rounds == 0:
                self.notify(f"  not confirmed: {confirmation.stop_reason}")
        return SearchResult(stages, accepted, confirmation, self.clock() - self.start)
