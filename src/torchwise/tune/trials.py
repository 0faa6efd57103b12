"""What the search records: trials, their status, stages, and the result.

A :class:`Trial` is one knob measured in one stage on top of the knobs accepted
before it. Its :class:`TrialStatus` is decided in one place, in this order: a
knob that cannot apply here is *not applicable*; one that raised is *failed*;
one whose correctness check failed is *incorrect*; one never timed is *not
measured*; otherwise its timing verdict.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from torchwise.tune.knobs import SPEED, Knob
from torchwise.tune.memory import StepMemory
from torchwise.tune.oracle import CheckResult
from torchwise.tune.session import ArmResult, SessionResult
from torchwise.tune.stats import Comparison, Verdict, median


class TrialStatus(str, enum.Enum):
    FASTER = "faster"
    SLOWER = "slower"
    SAME = "no significant difference"
    FAILED = "failed"
    INCORRECT = "incorrect"
    NOT_APPLICABLE = "not applicable"
    NOT_MEASURED = "not measured"

    @property
    def broken(self) -> bool:
        """The knob broke the step: reported, never recommended."""
        return self in (TrialStatus.FAILED, TrialStatus.INCORRECT)

    @property
    def timed(self) -> bool:
        """The knob ran and was timed: it has a verdict, of whatever kind."""
        return self in (TrialStatus.FASTER, TrialStatus.SLOWER, TrialStatus.SAME)


@dataclass
class Trial:
    """One knob measured in one stage, on top of the knobs accepted before it."""

    knob: Knob
    stage: int
    on_top_of: tuple[str, ...]
    check: CheckResult | None = None
    error: str | None = None
    #: why the knob cannot apply to this step (a CUDA graph that cannot capture it)
    not_applicable: str | None = None
    first_step_s: float | None = None
    result: ArmResult | None = None
    baseline: ArmResult | None = None
    memory: StepMemory | None = None
    accepted: bool = False
    #: why a knob settled earlier is measured again in this stage, None for a
    #: first measurement or an undecided knob
    reopened: str | None = None

    @property
    def comparison(self) -> Comparison | None:
        return self.result.comparison if self.result is not None else None

    @property
    def status(self) -> TrialStatus:
        if self.not_applicable is not None:
            return TrialStatus.NOT_APPLICABLE
        if self.error is not None:
            return TrialStatus.FAILED
        if self.check is not None and not self.check.ok:
            return TrialStatus.INCORRECT
        if self.comparison is None:
            return TrialStatus.NOT_MEASURED
        return TrialStatus(self.comparison.verdict.value)

    @property
    def faster(self) -> bool:
        return self.status is TrialStatus.FASTER

    @property
    def decided(self) -> bool:
        """Whether measuring the knob again, on any incumbent, is pointless by default.

        Knobs that did not run, memory knobs (measured once for their trade-off),
        and knobs whose "slower" or "no significant difference" was settled. A
        faster knob stays pending (measured again on top of what gets accepted),
        and so does one the noise or the budget left undecided.
        """
        if not self.status.timed or self.knob.kind != SPEED:
            return True
        c = self.comparison
        return c is not None and c.settled and c.verdict is not Verdict.FASTER


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
    #: how the correctness checks ran (train and eval mode, or eval only)
    check_mode: str = ""

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
class Diluted:
    """A knob settled as "no significant difference", and what its interval still allows.

    ``saving_s`` is the most a step could have saved by it, per its interval: the
    interval's low end below 1 times the step it was measured on.
    """

    knob: Knob
    saving_s: float
    step_s: float


def saving_bound(trial: Trial, first_groups: frozenset[str]) -> Diluted | None:
    """What a settled "no significant difference" leaves open, or None for other verdicts."""
    c, result = trial.comparison, trial.result
    if (
        c is None
        or result is None
        or trial.status is not TrialStatus.SAME
        or trial.knob.kind != SPEED
        or trial.knob.groups & first_groups
        or not c.settled
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
