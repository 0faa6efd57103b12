"""Which knobs to recommend: checked, measured, and combined greedily.

1. **The thread count first**, alone: it changes every other knob's timing (and,
   on a busy machine, its noise), so the rest are measured on top of the best
   count. Its stage gets its knobs' share of the knobs pending
   (:func:`stage_share`).
2. **Stages.** Each knob is applied to a fresh private copy on top of the knobs
   accepted so far (the *incumbent*), checked for correctness against the fp32
   baseline (:mod:`torchwise.tune.oracle`), and timed against the incumbent in
   one interleaved session. The knob with the largest significant speedup is
   accepted (among knobs whose intervals hold that speedup, the one that
   constrains the step least: bf16 before fp16, whose GradScaler rules out a CUDA
   graph); the knobs still undecided are measured again on top of it. At most
   one knob per group, at most ``max_stages`` stages.
3. **Reopening.** A settled verdict holds for the step it was measured on. A
   settled knob is measured again on top of a newly accepted one when
   - its interval allows a saving that is a useful share of the new, shorter
     step (:meth:`Search.diluted_worth_reopening`): a fixed saving is diluted on
     a step dominated by something else, such as waiting for the loader;
   - it changes the same part of the step (:attr:`Knob.phase`): effects there
     need not add up;
   - it gains *with* the accepted knob's group (:attr:`Knob.interacts`): NHWC
     layouts pay off with autocast's tensor-core kernels, not in fp32;
   - it is a thread count and the accepted knob adds loader worker processes,
     which compete with the step's threads for the cores (measured alone, first).
   Each at most once per reason.
4. **Compile on top.** ``torch.compile`` (opt-in) is measured last, on top of
   everything accepted: its gain is over the step the user will run.
5. **Confirmation.** With two or more knobs accepted, the combination is measured
   against the original baseline, if its first look fits the remaining budget;
   otherwise the report says it was not measured, and why.

Memory knobs (activation checkpointing) are measured once for their time and
memory cost and reported as trade-offs, never accepted as speedups.
"""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from torchwise.tune.arms import (
    Settle,
    session_arms,
    session_config,
    settle_for,
    step_memory,
)
from torchwise.tune.graphs import NotApplicable
from torchwise.tune.knobs import SPEED, Knob
from torchwise.tune.oracle import Oracle, precision_of
from torchwise.tune.session import SessionConfig, SessionResult, first_round, run_session
from torchwise.tune.step import StepSettings, TrainingStep, Workload, time_limit
from torchwise.tune.trials import Diluted, SearchResult, Stage, Trial, saving_bound

Notify = Callable[[str], None]
SessionRunner = Callable[..., SessionResult]

#: Groups measured before all others (see the module docstring).
FIRST_GROUPS = frozenset({"threads"})
#: Groups measured after all others, on top of what was accepted.
LAST_GROUPS = frozenset({"compile"})
#: Share of the remaining budget a loader trial undecided at its stage's end may
#: take for a session of its own (a loader's step times arrive in bursts, so its
#: interval narrows more slowly than a compute knob's).
LOADER_FOLLOW_UP_SHARE = 0.5


@dataclass(frozen=True)
class SearchConfig:
    budget_s: float = 60.0
    session: SessionConfig = field(default_factory=SessionConfig)
    compile_budget_s: float | None = 300.0
    seed: int = 0
    max_stages: int = 5


def settings_for(knobs: Sequence[Knob]) -> StepSettings:
    settings = StepSettings()
    for knob in knobs:
        settings = settings.merged(**knob.changes)
    return settings


def constraints(knob: Knob) -> int:
    """How many later knobs the knob rules out: a GradScaler rules out CUDA graphs."""
    return int(bool(knob.changes.get("grad_scaler")))


def _ratio(trial: Trial) -> float:
    return trial.comparison.ratio if trial.comparison is not None else 1.0


def _holds(trial: Trial, ratio: float) -> bool:
    c = trial.comparison
    return c is not None and c.ci_low <= ratio <= c.ci_high


def _one_line(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def added_workers(workload: Workload, knob: Knob) -> int:
    """Loader worker processes a knob adds to the user's loader (0 for other knobs)."""
    loader = knob.changes.get("loader")
    if loader is None:
        return 0
    user = workload.loader.user_settings.num_workers if workload.loader is not None else 0
    return max(0, int(loader.num_workers) - user)


def stage_share(candidates: Sequence[Knob], pending: Sequence[Knob]) -> float:
    """The thread stage's share of the remaining budget: its knobs' share of those pending.

    Between 15% and 35% (60% when nothing else waits): a thread count within a
    few percent of another is the slowest knob to settle on a noisy machine, and
    a large thread effect still settles at the first look.
    """
    if len(candidates) >= len(pending):
        return 0.6
    return min(0.35, max(0.15, len(candidates) / len(pending)))


@dataclass
class SearchState:
    """Where the greedy search stands between stages."""

    pending: list[Knob]
    incumbent: list[Knob] = field(default_factory=list)
    accepted: list[Trial] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    #: settled "no significant difference" knobs, with the saving their interval allows
    diluted: dict[str, Diluted] = field(default_factory=dict)
    #: timed speed knobs settled slower or no different, which an accepted knob
    #: they interact with may reopen
    settled: dict[str, Knob] = field(default_factory=dict)
    #: knob id -> why it is measured again in the next stage that measures it
    reopened: dict[str, str] = field(default_factory=dict)
    #: thread-count knobs measured and not accepted, until loader workers reopen them
    threads_measured: dict[str, Knob] = field(default_factory=dict)
    #: knobs measured alone in the next stage (thread counts reopened by workers)
    next_alone: list[Knob] = field(default_factory=list)
    last_done: bool = False

    @property
    def groups(self) -> set[str]:
        return {g for k in self.incumbent for g in k.groups}

    def first_candidates(self) -> list[Knob]:
        first = [k for k in self.pending if k.groups & FIRST_GROUPS]
        return first or self._middle() or self._last()

    def _middle(self) -> list[Knob]:
        return [k for k in self.pending if not k.groups & (FIRST_GROUPS | LAST_GROUPS)]

    def _last(self) -> list[Knob]:
        if self.last_done:
            return []
        self.last_done = True
        return [k for k in self.pending if k.groups & LAST_GROUPS]

    def next_candidates(self, progress: bool) -> list[Knob]:
        """After a stage: thread counts reopened, else the pending knobs, else compile."""
        if self.next_alone:
            alone, self.next_alone = self.next_alone, []
            return alone
        if progress and not self.last_done:
            middle = self._middle()
            if middle:
                return middle
        return self._last()

    def record(self, stage: Stage) -> None:
        """Take a stage's trials in: what is decided leaves the pending knobs."""
        self.stages.append(stage)
        for trial in stage.trials:
            trial.reopened = self.reopened.pop(trial.knob.id, None)
            first = bool(trial.knob.groups & FIRST_GROUPS)
            if first and trial.reopened is None and trial.status.timed:
                self.threads_measured[trial.knob.id] = trial.knob
            if trial.decided and trial.knob in self.pending:
                self.pending.remove(trial.knob)
                bound = saving_bound(trial, FIRST_GROUPS)
                if bound is not None:
                    self.diluted[trial.knob.id] = bound
                if trial.status.timed and trial.knob.kind == SPEED and not first:
                    self.settled[trial.knob.id] = trial.knob

    def best_of(self, stage: Stage) -> Trial | None:
        """The stage's fastest winner; among the winners whose interval holds its ratio
        (a tie the noise decides), the one that constrains the step least.

        bf16 and fp16 autocast are such a tie on a GPU with bf16 tensor cores (GPT-2
        on an H200: 2.75x and 2.80x, intervals overlapping), and fp16's GradScaler
        reads back to the host every step, which rules out a CUDA graph on top: bf16
        with a graph was 1.44x faster than the fp16 the noise had picked."""
        winners = [t for t in stage.trials if t.knob.kind == SPEED and t.faster]
        if not winners:
            return None
        fastest = min(winners, key=_ratio)
        ties = [t for t in winners if _holds(t, _ratio(fastest))]
        return min(ties, key=lambda t: (constraints(t.knob), _ratio(t)))

    def accept(self, trial: Trial) -> None:
        trial.accepted = True
        self.accepted.append(trial)
        self.incumbent.append(trial.knob)
        groups = self.groups
        self.pending = [k for k in self.pending if k is not trial.knob and not k.groups & groups]

    def reopen(self, knob: Knob, why: str, *, alone: bool = False) -> None:
        self.diluted.pop(knob.id, None)
        self.settled.pop(knob.id, None)
        self.threads_measured.pop(knob.id, None)
        if knob not in self.pending:
            self.pending.append(knob)
        if alone:
            self.next_alone.append(knob)
        self.reopened[knob.id] = why


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
        oracle: Oracle | None = None,
    ) -> None:
        self.workload = workload
        self.knobs = list(knobs)
        self.config = config
        self.notify = notify
        self.clock = clock
        self.runner = runner
        self.oracle = oracle or Oracle(workload, seed=config.seed)
        self.start = clock()
        #: seconds spent checking knobs: they come on top of the timing budget
        self.checking_s = 0.0

    def remaining(self) -> float:
        """What is left of the budget for timing (the correctness checks are not timed)."""
        spent = self.clock() - self.start - self.checking_s
        return max(0.0, self.config.budget_s - spent)

    def _prepare(
        self, knob: Knob, incumbent: Sequence[Knob], stage: int
    ) -> tuple[Trial, TrainingStep | None]:
        """A fresh arm for ``knob`` on top of ``incumbent``, checked (None: not to be timed)."""
        trial = Trial(knob, stage, tuple(k.id for k in incumbent))
        settings = settings_for([*incumbent, knob])
        try:
            step = TrainingStep(self.workload, settings)
            budget = self.config.compile_budget_s if settings.compile else None
            started = time.perf_counter()
            with time_limit(budget, "torch.compile's first step"):
                trial.check = self.oracle.judge(
                    step,
                    steps=knob.check_steps,
                    precision_accepted=precision_of(settings_for(incumbent))
                    is precision_of(settings),
                )
            trial.first_step_s = time.perf_counter() - started
        except NotApplicable as exc:
            trial.not_applicable = exc.message
            return trial, None
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
            checking = self.clock()
            trial, step = self._prepare(knob, incumbent, stage)
            self.checking_s += self.clock() - checking
            trials.append(trial)
            if step is not None:
                steps[knob.id] = step
        base_step = TrainingStep(self.workload, settings_for(incumbent))
        settle = settle_for([base_step.settings] + [s.settings for s in steps.values()])
        session = None
        if steps:
            self.notify(f"  timing {len(steps)} arm(s), interleaved, for up to {budget_s:.0f} s")
            # The search acts only on "faster": an arm that cannot be usefully
            # faster is done (futility), which leaves the budget to the others.
            config = session_config(
                self.config.session,
                budget_s=budget_s,
                seed=self.config.seed + stage,
                settle=settle,
                futility=True,
            )
            named = [("baseline", base_step), *steps.items()]
            session = self.runner(*session_arms(self.workload, named, settle), config)
            for trial in trials:
                if trial.knob.id in session.arms:
                    result = session.arms[trial.knob.id]
                    trial.result, trial.baseline = result, session.baseline
                    if result.error is not None:
                        trial.error = result.error
                    trial.memory = step_memory(steps[trial.knob.id])
            self._follow_up_loader_trials(stage, trials, steps, base_step, settle, session)
        incumbent_ids = tuple(k.id for k in incumbent)
        return Stage(stage, incumbent_ids, session, trials, step_memory(base_step))

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
        verdict replaces the stage's (pooling would let the new session stop on its
        own pairs while the pooled interval stays open). A second session is a
        second chance at a false "faster": a loader trial errs at most twice the
        session's rate.
        """
        undecided = [
            t
            for t in trials
            if t.knob.changes.get("loader") is not None
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
        more = self.runner(*session_arms(self.workload, named, settle), config)
        for trial in undecided:
            if trial.knob.id in more.arms:
                trial.result, trial.baseline = more.arms[trial.knob.id], more.baseline
                trial.error = trial.result.error

    def diluted_worth_reopening(self, state: SearchState, best: Trial) -> dict[str, str]:
        """Settled "no significant difference" knobs whose saving could matter on ``best``'s step.

        A knob's interval bounds its saving in seconds on the step it was measured
        on; set against the new incumbent's shorter step, it is measured again
        when that saving could exceed the gain the settling rule ruled out.
        """
        result = best.result
        if result is None or not result.samples:
            return {}
        new_step_s = result.median_s
        session = self.config.session
        useful = 1 - 1 / (1 + max(session.equivalence, session.min_effect))
        reasons = {}
        for knob_id, d in state.diluted.items():
            if d.knob.groups & state.groups:
                continue
            possible = d.saving_s / new_step_s
            if possible > useful:
                reasons[knob_id] = (
                    f"settled as no significant difference on a {d.step_s * 1e3:.3g} ms step, "
                    f"its interval allows up to {d.saving_s * 1e3:.2g} ms a step, "
                    f"{possible:.0%} of the {new_step_s * 1e3:.3g} ms step with {best.knob.id}"
                )
        return reasons

    @staticmethod
    def related_to_reopen(state: SearchState, best: Trial) -> dict[str, str]:
        """Settled knobs of ``best``'s phase, or that gain with its group (module docstring)."""
        reasons = {}
        phase, group = best.knob.phase, best.knob.group
        for knob_id, knob in state.settled.items():
            if knob.groups & state.groups:
                continue
            if phase and knob.phase == phase and knob_id in state.diluted:
                reasons[knob_id] = (
                    f"settled without {best.knob.id}, which changes the same part of the "
                    f"step ({phase}): effects there need not add up"
                )
            elif best.knob.groups & knob.interacts:
                reasons[knob_id] = f"settled without {best.knob.id}, and it gains with {group}"
        return reasons

    def threads_to_reopen(self, state: SearchState, best: Trial) -> dict[str, str]:
        """Thread counts to measure again, alone, once ``best`` adds loader workers."""
        workers = added_workers(self.workload, best.knob)
        if not workers:
            return {}
        return {
            knob_id: (
                f"measured without {best.knob.id}, whose {workers} worker process(es) "
                f"share the machine's {os.cpu_count() or 1} cores with the step's threads"
            )
            for knob_id, knob in state.threads_measured.items()
            if not knob.groups & state.groups
        }

    def _after_accepting(self, state: SearchState, best: Trial) -> None:
        state.accept(best)
        knobs = {k.id: k for k in self.knobs}
        related = {
            **self.diluted_worth_reopening(state, best),
            **self.related_to_reopen(state, best),
        }
        for knob_id, why in related.items():
            state.reopen(knobs[knob_id], why)
            self.notify(f"  {knob_id} measured again: {why}")
        for knob_id, why in self.threads_to_reopen(state, best).items():
            state.reopen(knobs[knob_id], why, alone=True)
            self.notify(f"  {knob_id} measured again: {why}")

    def run(self) -> SearchResult:
        state = SearchState(pending=list(self.knobs))
        candidates = state.first_candidates()
        index = 1
        while candidates and index <= self.config.max_stages:
            first_only = all(k.groups & FIRST_GROUPS for k in candidates)
            share = stage_share(candidates, state.pending) if first_only else 0.6
            stage = self.run_stage(index, state.incumbent, candidates, self.remaining() * share)
            state.record(stage)
            best = state.best_of(stage)
            if best is not None:
                self._after_accepting(state, best)
            candidates = state.next_candidates(progress=best is not None or first_only)
            index += 1
        confirmation = self._confirm(state) if len(state.accepted) >= 2 else None
        return SearchResult(
            state.stages,
            state.accepted,
            confirmation,
            self.clock() - self.start,
            check_mode=self.oracle.mode,
        )

    def _confirm(self, state: SearchState) -> SessionResult:
        """The accepted knobs together against the original baseline, if its first look fits."""
        self.notify("confirming the combination against the baseline")
        base = TrainingStep(self.workload)
        combined = TrainingStep(self.workload, settings_for(state.incumbent))
        settle = settle_for([base.settings, combined.settings])
        settle = settle._replace(steps=max(1, settle.steps))
        config = dataclasses.replace(
            session_config(
                self.config.session,
                budget_s=self.remaining(),
                seed=self.config.seed + 99,
                settle=settle,
            ),
            # Optional evidence: the budget is the user's promise, and a
            # session's first look otherwise always runs (11 rounds).
            first_look_must_fit=True,
        )
        named = [("baseline", base), ("combined", combined)]
        confirmation = self.runner(*session_arms(self.workload, named, settle), config)
        if confirmation.rounds == 0:
            self.notify(f"  not confirmed: {confirmation.stop_reason}")
        return confirmation
