"""The result of a doctor run: one :class:`CheckResult` per check, in a :class:`Report`.

A report renders three ways: ``text`` (a table of checks, then details for every
warn and fail), ``json`` (the stable, documented schema in docs/doctor.md) and
``markdown`` (reads like an expert's note, for a pull request or an issue).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

#: Bumped only on an incompatible change to the JSON layout.
SCHEMA_VERSION = 1


class Status(str, enum.Enum):
    """Outcome of one check. ``fail`` makes the CLI exit 1; ``warn`` does not."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass
class CheckResult:
    """What one check measured and what it concluded.

    ``evidence`` holds the measured numbers (JSON-serialisable), ``where`` the
    submodules or parameters involved, ``causes`` the likely causes and ``fix``
    what to do about it. Passing checks keep their evidence too.
    """

    id: str
    status: Status
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    where: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    fix: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": _jsonable(self.evidence),
            "where": list(self.where),
            "causes": list(self.causes),
            "fix": self.fix,
            "seconds": round(self.seconds, 4),
        }


def _jsonable(value: Any) -> Any:
    """Evidence may hold floats like inf/nan and tuples; make it strict JSON."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        return float(f"{value:.6g}")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


@dataclass
class Report:
    """All check results for one model and one batch."""

    target: str
    inputs: list[str]
    loss: str
    results: list[CheckResult]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: how many checks the run was asked for (more than ``results`` after Ctrl-C)
    planned: int | None = None

    @property
    def interrupted(self) -> bool:
        """True when the run stopped (Ctrl-C) before every planned check finished."""
        return self.planned is not None and len(self.results) < self.planned

    def __getitem__(self, check_id: str) -> CheckResult:
        for result in self.results:
            if result.id == check_id:
                return result
        raise KeyError(check_id)

    def __iter__(self) -> Any:
        return iter(self.results)

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if r.status is Status.FAIL]

    @property
    def warned(self) -> list[CheckResult]:
        return [r for r in self.results if r.status is Status.WARN]

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings and skips allowed)."""
        return not self.failed

    def counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in Status}
        for result in self.results:
            counts[result.status.value] += 1
        return counts

    # -- rendering -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "target": self.target,
            "inputs": list(self.inputs),
            "loss": self.loss,
            "ok": self.ok,
            "interrupted": self.interrupted,
            "counts": self.counts(),
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
            "checks": [r.to_dict() for r in self.results],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        lines = [f"torchwise doctor: {self.target}  inputs {', '.join(self.inputs)}"]
        lines.append(f"loss: {self.loss}")
        lines.extend(f"note: {note}" for note in self.notes)
        lines.append("")
        lines.append(f"{'check':<{ID_WIDTH}}  status  {'time':>6}  summary")
        lines.extend(line_for(r) for r in self.results)
        flagged = [r for r in self.results if r.status in (Status.FAIL, Status.WARN)]
        for r in flagged:
            lines.append("")
            lines.append(f"{r.status.value.upper()} {r.id}: {r.summary}")
            if r.where:
                lines.append(f"  where:    {', '.join(r.where[:8])}" + _more(r.where, 8))
            for key, value in _flat_evidence(r.evidence):
                lines.append(f"  {key}: {value}")
            for cause in r.causes:
                lines.append(f"  cause:    {cause}")
            if r.fix:
                lines.append(f"  fix:      {r.fix}")
        counts = self.counts()
        lines.append("")
        lines.append(
            f"{counts['fail']} failed, {counts['warn']} warned, {counts['pass']} passed, "
            f"{counts['skip']} skipped in {self.seconds:.1f}s"
            + (f" (interrupted: {len(self.results)} of {self.planned} checks ran)"
               if self.interrupted else "")
        )  # fmt: skip
        return "\n".join(lines)

    def to_markdown(self) -> str:
        icon = {Status.PASS: "pass", Status.WARN: "**warn**", Status.FAIL: "**FAIL**"}
        lines = [f"## torchwise doctor: `{self.target}`", ""]
        counts = self.counts()
        verdict = "has problems" if self.failed else "looks healthy"
        lines.append(
            f"I ran `{self.target}` on {', '.join(f'`{i}`' for i in self.inputs)} with "
            f"{self.loss}. It {verdict}: {counts['fail']} failed, {counts['warn']} warned, "
            f"{counts['pass']} passed, {counts['skip']} skipped."
        )
        lines.extend(["", "| check | status | summary |", "|---|---|---|"])
        for r in self.results:
            status = icon.get(r.status, r.status.value)
            lines.append(f"| `{r.id}` | {status} | {r.summary.replace('|', '/')} |")
        for r in [r for r in self.results if r.status in (Status.FAIL, Status.WARN)]:
            lines.extend(["", f"### `{r.id}` ({r.status.value}): {r.summary}", ""])
            if r.where:
                lines.append("Involved: " + ", ".join(f"`{w}`" for w in r.where[:8]) + ".")
            lines.append("")
            lines.append("Evidence:")
            lines.extend(f"- {key}: {value}" for key, value in _flat_evidence(r.evidence))
            if r.causes:
                lines.extend(["", "Likely causes:"])
                lines.extend(f"- {cause}" for cause in r.causes)
            if r.fix:
                lines.extend(["", f"Fix: {r.fix}"])
        return "\n".join(lines) + "\n"

    def render(self, fmt: str) -> str:
        if fmt == "json":
            return self.to_json()
        if fmt == "markdown":
            return self.to_markdown()
        return self.to_text()


#: width of the check-id column: the longest public id ("batch-independence")
ID_WIDTH = 18


def line_for(r: CheckResult) -> str:
    """One table line for a finished check (also the live progress line)."""
    return f"{r.id:<{ID_WIDTH}}  {r.status.value.upper():<6}  {r.seconds:>5.2f}s  {r.summary}"


def _more(items: list[str], shown: int) -> str:
    return f" (+{len(items) - shown} more)" if len(items) > shown else ""


def _flat_evidence(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for key, value in evidence.items():
        if isinstance(value, float):
            text = f"{value:.4g}"
        elif isinstance(value, (list, tuple)) and len(value) > 6:
            text = ", ".join(str(v) for v in value[:6]) + f" (+{len(value) - 6} more)"
        elif isinstance(value, (list, tuple)):
            text = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            items = list(value.items())
            text = ", ".join(f"{k}={_short(v)}" for k, v in items[:6]) + _more(
                [str(k) for k, _ in items], 6
            )
        else:
            text = str(value)
        out.append((key, text))
    return out


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
