"""The check protocol: a check *measures* the model, then *judges* the measurement.

``measure(ctx)`` runs the model and returns a small dataclass of numbers (or a
:class:`Verdict` straight away when there is nothing to measure); ``judge(m)``
turns those numbers into a verdict with no further model runs, so every
threshold lives in one pure function that can be read and tested on its own.
The registry supplies the check's public id; a check never names itself.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from torchwise.doctor.context import Context
from torchwise.doctor.facts import Facts
from torchwise.doctor.report import Status


class Why(enum.Enum):
    """Why a check produced no judgement (both render as a skip or a warning)."""

    #: the check does not apply to this model (a regressor has no chance loss): SKIP
    NOT_APPLICABLE = "not applicable"
    #: the check applies but cannot be measured here: SKIP, or WARN when the user asked
    #: for this check by name (a requested check never passes silently)
    CANNOT_RUN = "cannot run"


@dataclass
class Verdict:
    """What a check concluded; the runner adds the id and the time."""

    status: Status
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    where: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    fix: str = ""
    #: set for SKIP verdicts: whether the check was inapplicable or could not run
    why_not: Why | None = None

    @classmethod
    def passed(cls, summary: str, **evidence: Any) -> Verdict:
        return cls(Status.PASS, summary, evidence=dict(evidence))

    @classmethod
    def not_applicable(cls, reason: str, **evidence: Any) -> Verdict:
        return cls(Status.SKIP, reason, evidence=dict(evidence), why_not=Why.NOT_APPLICABLE)

    @classmethod
    def cannot_run(cls, reason: str, **evidence: Any) -> Verdict:
        return cls(Status.SKIP, reason, evidence=dict(evidence), why_not=Why.CANNOT_RUN)


@dataclass(frozen=True)
class Run:
    """What a check gets: the run's context and its shared facts."""

    ctx: Context
    facts: Facts


M = TypeVar("M")


class Check(ABC, Generic[M]):
    """One health check. Subclasses set ``cost`` and implement both steps; the id and
    the title live in :mod:`torchwise.doctor.registry`."""

    #: what it costs, in forwards and backwards of one batch
    cost: ClassVar[str]

    @abstractmethod
    def measure(self, run: Run) -> M | Verdict:
        """Run the model and return the numbers the judgement needs."""

    @abstractmethod
    def judge(self, m: M) -> Verdict:
        """Decide from the numbers alone: no model runs here."""

    def verdict(self, run: Run) -> Verdict:
        measured = self.measure(run)
        return measured if isinstance(measured, Verdict) else self.judge(measured)
