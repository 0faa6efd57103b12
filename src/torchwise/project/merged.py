"""One report from four kinds of evidence, in the order a reviewer writes it.

An expert's review of a project reads: the critical issues, then performance,
then best practices, then what is done well, then the tests to add. The audit
has four witnesses: ``review`` (reading), ``run`` (the training command,
executed), ``doctor`` (each model, measured) and ``ckpt`` (each checkpoint,
parsed without executing it). :func:`merge` puts their findings into those five
sections, one entry per problem:

- a review finding and a run finding of the same class (:data:`SAME_CLASS`)
  in the same file, a few lines apart or in the same function, are one entry:
  the static finding *confirmed* by execution, with the run's message as its
  evidence (torch's deprecation warning at a line the review calls deprecated
  too);
- a run finding no review rule reads is marked *execution only*;
- errors and warnings are critical (performance findings go to performance),
  hints are best practices; doctor's FAILs are critical and its WARNs best
  practices; an UNSAFE checkpoint is critical;
- what passed is said too: the checks a model passes, the checkpoints that
  load without running code, a training run with no finding.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from torchwise.project.schema import (
    CheckpointEntry,
    FindingRow,
    MergedFinding,
    ModelAudit,
    ProjectReport,
    RunSummary,
    Section,
)

SeverityName = Literal["error", "warning", "info"]

#: run check -> the review rules that read the same bug class from the source.
SAME_CLASS: dict[str, frozenset[str]] = {
    "TWR101": frozenset({"TW101"}),
    "TWR103": frozenset({"TW118", "TW155"}),
    "TWR105": frozenset({"TW103"}),
    "TWR106": frozenset({"TW109"}),
    "TWR109": frozenset({"TW106"}),
    "TWR112": frozenset({"TW102"}),
    "TWR113": frozenset({"TW150"}),
    "TWR114": frozenset({"TW156"}),
    "TWR201": frozenset({"TW104"}),
    "TWR202": frozenset({"TW114"}),
    "TWR203": frozenset({"TW105"}),
    "TWR301": frozenset({"TW115"}),
    "TWR306": frozenset({"TW127", "TW153"}),
    "TWR401": frozenset({"TW701", "TW712"}),
    "TWR402": frozenset({"TW702"}),
    "TWR403": frozenset({"TW140"}),
    "TWR501": frozenset({"TW604"}),
    "TWR504": frozenset({"TW607"}),
}
#: lines apart at which a static and a run finding of one class are one problem
NEAR = 5
ORDER = {"critical": 0, "performance": 1, "practice": 2, "positive": 3, "tests": 4}
RANK = {"error": 0, "warning": 1, "info": 2, None: 3}


def merge(report: ProjectReport) -> list[MergedFinding]:
    """Every finding of ``report`` once, in the reviewer's order."""
    review = list(report.review.findings) if report.review is not None else []
    confirmed: set[int] = set()  # ids of the review rows a run finding confirmed
    places = _Functions(Path(report.knowledge.root))
    entries = _from_run(report.run, review, confirmed, places) if report.run is not None else []
    entries += [_from_review(row) for row in review if id(row) not in confirmed]
    for audit in report.models:
        entries += _from_doctor(audit)
    entries += _from_checkpoints(report.checkpoints)
    entries += _tests_to_add(report)
    return sorted(
        entries,
        key=lambda e: (ORDER[e.section], RANK[e.severity], e.path or "", e.line or 0),
    )


def _section(row: FindingRow) -> Section:
    if row.family == "performance":
        return "performance"
    return "critical" if row.severity in ("error", "warning") else "practice"


def _from_review(row: FindingRow) -> MergedFinding:
    return MergedFinding(
        section=_section(row),
        severity=row.severity,
        title=row.message,
        path=row.path,
        line=row.line,
        sources=[f"review {row.code} {row.rule}"],
    )


class _Functions:
    """The innermost function around a line of a project file (parsed once per file)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.spans: dict[str, list[tuple[int, int]]] = {}

    def around(self, path: str, line: int) -> tuple[int, int] | None:
        if path not in self.spans:
            self.spans[path] = _function_spans(self.root / path)
        inside = [(a, b) for a, b in self.spans[path] if a <= line <= b]
        return min(inside, key=lambda span: span[1] - span[0]) if inside else None


def _function_spans(path: Path) -> list[tuple[int, int]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return []
    return [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _from_run(
    run: RunSummary, review: list[FindingRow], confirmed: set[int], places: _Functions
) -> list[MergedFinding]:
    entries: list[MergedFinding] = []
    by_review: dict[int, MergedFinding] = {}
    for row in run.findings:
        section: Section
        if row.code == "TWR002" and row.severity == "info":
            section = "practice"
        else:
            section = "performance" if row.code == "TWR403" else _section(row)
        match = _same_problem(row, review, places)
        if match is not None and id(match) in by_review:  # a second run finding of one problem
            by_review[id(match)].sources.append(f"run {row.code} {row.rule}")
            continue
        entry = MergedFinding(
            section=section,
            severity=_worse(row.severity, match.severity) if match else row.severity,
            title=match.message if match else row.message,
            path=match.path if match else row.path,
            line=match.line if match else row.line,
            sources=[f"run {row.code} {row.rule}"],
            evidence=(
                f"seen running {run.command}: {row.message} ({row.path}:{row.line})"
                if match is not None
                else f"seen running {run.command}"
            ),
            confirmed=match is not None,
            execution_only=row.code not in SAME_CLASS and row.code not in ("TWR001", "TWR002"),
        )
        if match is not None:
            entry.sources.insert(0, f"review {match.code} {match.rule}")
            confirmed.add(id(match))
            by_review[id(match)] = entry
        entries.append(entry)
    if not any(row.severity != "info" for row in run.findings) and run.error is None and run.ran:
        entries.append(
            MergedFinding(
                section="positive",
                title=f"the training command runs with no bug found: {run.ran}",
                sources=["run"],
                evidence=f"{run.command} ({run.source})",
            )
        )
    return entries


def _same_problem(
    row: FindingRow, review: Iterable[FindingRow], places: _Functions
) -> FindingRow | None:
    """The review finding that reads the problem ``row`` saw: same class, same file, and a
    few lines apart or in the same function; torch's own deprecation warning and the review's
    deprecation at the same line."""
    codes = SAME_CLASS.get(row.code, frozenset())
    for candidate in review:
        if candidate.path != row.path:
            continue
        if row.code == "TWR002" and candidate.family == "deprecated":
            if candidate.line == row.line:
                return candidate
            continue
        if candidate.code not in codes:
            continue
        if abs(candidate.line - row.line) <= NEAR:
            return candidate
        function = places.around(row.path, row.line)
        if function is not None and function == places.around(candidate.path, candidate.line):
            return candidate
    return None


def _worse(a: SeverityName, b: SeverityName) -> SeverityName:
    return a if RANK[a] <= RANK[b] else b


def _from_doctor(audit: ModelAudit) -> list[MergedFinding]:
    doctor = audit.doctor
    if doctor is None:
        return []
    entries: list[MergedFinding] = []
    passed = [check.id for check in doctor.checks if check.status == "pass"]
    for check in doctor.checks:
        if check.status not in ("fail", "warn"):
            continue
        entries.append(
            MergedFinding(
                section="critical" if check.status == "fail" else "practice",
                severity="error" if check.status == "fail" else "warning",
                title=f"{audit.name}: {check.summary}",
                path=audit.path,
                sources=[f"doctor {check.id}"],
                evidence="; ".join(f"{k}: {v}" for k, v in list(check.evidence.items())[:4]),
                execution_only=True,
            )
        )
    if passed:
        entries.append(
            MergedFinding(
                section="positive",
                title=f"{audit.name} passes {len(passed)} of {len(doctor.checks)} health checks",
                path=audit.path,
                sources=["doctor"],
                evidence=", ".join(passed),
            )
        )
    return entries


def _from_checkpoints(entries: list[CheckpointEntry]) -> list[MergedFinding]:
    merged: list[MergedFinding] = []
    safe = [entry.path for entry in entries if entry.verdict == "safe"]
    for entry in entries:
        if entry.verdict == "safe":
            continue
        reasons = "; ".join(f.reason for f in entry.findings[:3]) or (entry.error or "")
        merged.append(
            MergedFinding(
                section="critical" if entry.verdict in ("unsafe", "error") else "practice",
                severity="error" if entry.verdict == "unsafe" else "warning",
                title=f"checkpoint {entry.path} is {entry.verdict.upper()}",
                path=entry.path,
                sources=["ckpt scan"],
                evidence=reasons,
            )
        )
    if safe:
        merged.append(
            MergedFinding(
                section="positive",
                title=f"{len(safe)} checkpoint(s) load without running code",
                sources=["ckpt scan"],
                evidence=", ".join(safe[:5]) + (" ..." if len(safe) > 5 else ""),
            )
        )
    return merged


def _tests_to_add(report: ProjectReport) -> list[MergedFinding]:
    """A generated test per model that builds, and a training smoke test when the run found bugs."""
    merged: list[MergedFinding] = []
    for audit in report.models:
        if audit.doctor is None or audit.error:
            continue
        merged.append(
            MergedFinding(
                section="tests",
                title=f"a pytest module for {audit.name}: the checks it passes, kept passing",
                path=audit.path,
                sources=["tests"],
                evidence=f"torchwise tests {audit.target} -o tests/test_{audit.name.lower()}.py",
            )
        )
    run = report.run
    if run is not None and any(row.severity != "info" for row in run.findings):
        merged.append(
            MergedFinding(
                section="tests",
                title="a smoke test of the training command: a few steps under torchwise run in CI",
                sources=["run"],
                evidence=f"torchwise run --steps 2 --epochs 1 {_script_part(run.command)}",
            )
        )
    return merged


def _script_part(command: str) -> str:
    words = command.split()
    for index, word in enumerate(words):
        if word.endswith(".py"):
            rest = words[index + 1 :]
            return word + (" -- " + " ".join(rest) if rest else "")
    return command
