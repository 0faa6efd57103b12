"""Findings: the typed result that review (and every command that reports
problems in the user's files) produces: a code at a place, with an optional fix.

A fix is a sorted list of text edits plus an applicability level, as in ruff:
only ``SAFE`` fixes apply by default; ``UNSAFE`` ones need ``--unsafe-fixes``
because a human should glance at them; ``DISPLAY`` fixes are suggestions only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(enum.Enum):
    ERROR = "error"  # almost certainly a bug
    WARNING = "warning"  # likely a bug or a trap
    INFO = "info"  # a performance or style hint; rules of this level are off by default

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


class Applicability(enum.Enum):
    DISPLAY = "display"  # shown, never applied
    UNSAFE = "unsafe"  # applied with --unsafe-fixes: may change behaviour in rare cases
    SAFE = "safe"  # applied with --fix: cannot change behaviour

    @property
    def rank(self) -> int:
        return {"display": 0, "unsafe": 1, "safe": 2}[self.value]


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the characters in ``[start, end)`` (0-based offsets into the file) with ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Fix:
    title: str  # imperative, shown to the user: "Use `weights_only=True`"
    edits: tuple[Edit, ...]
    applicability: Applicability = Applicability.SAFE


@dataclass(frozen=True)
class Finding:
    """One problem at one place. ``line`` and ``column`` are 1-based (columns in characters)."""

    code: str
    message: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    severity: Severity
    fix: Fix | None = None
    #: For notebooks, the 1-based code cell and the line within it.
    cell: int | None = None
    cell_line: int | None = None
    #: extra structured detail for JSON consumers (e.g. the receiver name)
    data: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def location(self) -> str:
        if self.cell is not None:
            return f"{self.path}:cell {self.cell}:{self.cell_line}:{self.column}"
        return f"{self.path}:{self.line}:{self.column}"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)


def finding_to_dict(finding: Finding) -> dict[str, object]:
    """The stable JSON form of a finding (documented in docs/review.md)."""
    return {
        "code": finding.code,
        "message": finding.message,
        "severity": finding.severity.value,
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "cell": finding.cell,
        "cell_line": finding.cell_line,
        "fix": None
        if finding.fix is None
        else {
            "title": finding.fix.title,
            "applicability": finding.fix.applicability.value,
            "edits": [
                {"start": edit.start, "end": edit.end, "text": edit.text}
                for edit in finding.fix.edits
            ],
        },
        "data": dict(finding.data),
    }


def finding_from_dict(data: dict[str, object]) -> Finding:
    """Inverse of :func:`finding_to_dict` (used by the cache)."""
    fix_data = data.get("fix")
    fix = None
    if isinstance(fix_data, dict):
        fix = Fix(
            title=str(fix_data["title"]),
            edits=tuple(
                Edit(int(edit["start"]), int(edit["end"]), str(edit["text"]))
                for edit in fix_data["edits"]
            ),
            applicability=Applicability(fix_data["applicability"]),
        )
    cell = data.get("cell")
    cell_line = data.get("cell_line")
    extra = data.get("data")
    return Finding(
        code=str(data["code"]),
        message=str(data["message"]),
        path=str(data["path"]),
        line=int(data["line"]),  # type: ignore[call-overload]
        column=int(data["column"]),  # type: ignore[call-overload]
        end_line=int(data["end_line"]),  # type: ignore[call-overload]
        end_column=int(data["end_column"]),  # type: ignore[call-overload]
        severity=Severity(data["severity"]),
        fix=fix,
        cell=None if cell is None else int(cell),  # type: ignore[call-overload]
        cell_line=None if cell_line is None else int(cell_line),  # type: ignore[call-overload]
        data={str(k): str(v) for k, v in extra.items()} if isinstance(extra, dict) else {},
    )
