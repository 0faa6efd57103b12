"""What ``write_tests`` returns: the module text and, for each test and check, why."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TestInfo:
    """One test of the file (or one left out of it)."""

    __test__ = False  # not a pytest test class, despite the name

    name: str  # "test_state_dict_round_trip"
    what: str  # what it proves
    why: str  # the evidence: "passed when generated", or why it was left out


@dataclass(frozen=True)
class CheckChoice:
    """One doctor check: in the file or not, and why."""

    id: str
    included: bool
    reason: str
    #: doctor's verdict on the model when the file was generated; None when not run
    status: str | None = None


@dataclass
class GeneratedTests:
    """A generated pytest module and the decisions behind it.

    ``status`` says what happened to the file: ``"generated"`` (nothing written),
    ``"written"``, or for a ``check``: ``"fresh"``, ``"stale"`` (``diff`` holds the
    change) or ``"missing"``.
    """

    __test__ = False

    text: str
    path: Path  # where the module lives (its imports are relative to it)
    target: str
    title: str  # the model's class name
    command: str  # the command that regenerates it, from the project root
    tests: list[TestInfo] = field(default_factory=list)
    left_out: list[TestInfo] = field(default_factory=list)
    checks: list[CheckChoice] = field(default_factory=list)
    doctor_options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: seconds the kept tests took when run to decide on them (the file's test time,
    #: without pytest's and torch's start-up)
    verified_seconds: float = 0.0
    status: str = "generated"
    diff: str = ""

    @property
    def included_checks(self) -> list[str]:
        return [c.id for c in self.checks if c.included]

    def summary(self) -> list[str]:
        """What the file holds and why, one line each (what the CLI prints on stderr)."""
        lines = [f"{test.name}: {test.what} ({test.why})" for test in self.tests]
        if self.included_checks:
            lines.append(f"test_doctor: {', '.join(self.included_checks)}")
        lines += [f"left out {test.name}: {test.why}" for test in self.left_out]
        left = [f"{c.id} ({c.reason})" for c in self.checks if not c.included]
        if left:
            lines.append(f"doctor checks left out: {'; '.join(left)}")
        lines += [f"note: {note}" for note in self.notes]
        return lines

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, ``path`` as a string, plus ``summary``."""
        data = asdict(self)
        data["path"] = str(self.path)
        data["included_checks"] = self.included_checks
        data["summary"] = self.summary()
        return data
