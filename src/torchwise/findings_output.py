"""Findings as text, JSON, SARIF or GitHub annotations, for every command that reports them.

A command hands over its findings and a lookup from a code to its
:class:`CodeInfo` (name, family, default severity, documentation, link); the
formats are the same for all of them:

- ``text``: ``path:line:col: CODE message``, then the evidence indented under it,
  then a count per code and one summary line (the command writes its own
  opening and closing lines around it);
- ``json``: one object with ``schema_version``, ``tool``, a ``summary`` of counts,
  the ``findings`` (:func:`torchwise.findings.finding_to_dict` plus the name and
  location) and whatever the command adds (``extra``);
- ``sarif``: SARIF 2.1.0 (:mod:`torchwise.sarif`), every code described once in
  ``tool.driver.rules`` and each result pointing at it;
- ``github``: one workflow command per finding (``::error file=...::message``),
  escaped as the Actions runner expects.

Nothing here imports torch, so any command can use it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchwise import __version__
from torchwise.findings import Finding, Severity, finding_to_dict
from torchwise.sarif import sarif_log

FORMATS = ("text", "json", "sarif", "github")
SCHEMA_VERSION = 1

LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_GITHUB = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
_COLORS = {Severity.ERROR: "\x1b[31m", Severity.WARNING: "\x1b[33m", Severity.INFO: "\x1b[36m"}
_BOLD, _DIM, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


@dataclass(frozen=True)
class CodeInfo:
    """What a report says about one finding code."""

    code: str
    name: str  # kebab-case, stable
    family: str
    severity: Severity  # the most serious level the code reports at
    summary: str  # one sentence
    doc: str  # Markdown with ruff's headings
    url: str  # where the documentation lives


Describe = Callable[[str], "CodeInfo | None"]


@dataclass(frozen=True)
class Document:
    """Everything a format needs besides the findings' own fields."""

    findings: Sequence[Finding]
    describe: Describe
    #: every code the command can report (SARIF describes them all), in order
    codes: Sequence[CodeInfo] = ()
    #: the command's own top-level JSON fields (e.g. ``run`` for the run's facts)
    extra: Mapping[str, object] = field(default_factory=dict)
    #: the noun of the summary line: "Found 2 problems (1 error, 1 warning) in <what>."
    scope: str = ""


def render(document: Document, fmt: str, *, color: bool = False) -> str:
    """``document`` in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "text":
        return render_text(document, color=color)
    if fmt == "json":
        return json.dumps(json_document(document), indent=2, ensure_ascii=False)
    if fmt == "sarif":
        return json.dumps(sarif_document(document), indent=2, ensure_ascii=False)
    if fmt == "github":
        return "\n".join(github_annotation(f, document.describe) for f in document.findings)
    raise ValueError(f"unknown format {fmt!r}")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def severity_counts(findings: Sequence[Finding]) -> str:
    """``1 error, 2 warnings`` (levels with no finding left out)."""
    counts = Counter(finding.severity for finding in findings)
    return ", ".join(_plural(counts[level], level.value) for level in Severity if counts[level])


def render_text(document: Document, *, color: bool = False) -> str:
    def paint(text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if color else text

    lines: list[str] = []
    for finding in document.findings:
        code = paint(finding.code, _BOLD + _COLORS[finding.severity])
        lines.append(f"{paint(finding.location, _BOLD)}: {code} {finding.message}")
        for key, value in finding.data.items():
            lines.append(paint(f"    {key}: {value}", _DIM))
    findings = document.findings
    scope = f" in {document.scope}" if document.scope else ""
    if not findings:
        return "\n".join([*lines, f"No problems found{scope}."])
    lines.append("")
    by_code = Counter(finding.code for finding in findings)
    width = max(len(str(count)) for count in by_code.values())
    for code, count in sorted(by_code.items(), key=lambda item: (-item[1], item[0])):
        info = document.describe(code)
        lines.append(f"{count:>{width}}  {paint(code, _BOLD)}  {info.name if info else ''}")
    lines.append(f"Found {_plural(len(findings), 'problem')} ({severity_counts(findings)}){scope}.")
    return "\n".join(lines)


def summary(findings: Sequence[Finding]) -> dict[str, object]:
    by_severity = Counter(finding.severity.value for finding in findings)
    return {
        "findings": len(findings),
        "by_severity": {level.value: by_severity[level.value] for level in Severity},
        "by_code": dict(sorted(Counter(finding.code for finding in findings).items())),
    }


def finding_json(finding: Finding, describe: Describe) -> dict[str, object]:
    """:func:`finding_to_dict` plus the code's name and the ``path:line:col`` location."""
    info = describe(finding.code)
    return {
        **finding_to_dict(finding),
        "name": info.name if info is not None else "",
        "location": finding.location,
    }


def json_document(document: Document) -> dict[str, object]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "torchwise", "version": __version__},
        **document.extra,
        "summary": summary(document.findings),
        "findings": [finding_json(f, document.describe) for f in document.findings],
    }


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotation(finding: Finding, describe: Describe) -> str:
    info = describe(finding.code)
    title = f"{finding.code} {info.name}" if info is not None else finding.code
    properties = [
        ("file", finding.path),
        ("line", str(finding.line)),
        ("col", str(finding.column)),
        ("endLine", str(finding.end_line)),
        ("endColumn", str(finding.end_column)),
        ("title", title),
    ]
    rendered = ",".join(f"{key}={_escape_property(value)}" for key, value in properties)
    return f"::{_GITHUB[finding.severity]} {rendered}::{_escape_data(finding.message)}"


def _artifact(path: str) -> dict[str, object]:
    """The SARIF artifact location: relative to the working directory when under it."""
    absolute = Path(path).resolve()
    try:
        relative = absolute.relative_to(Path.cwd().resolve())
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": relative.as_posix(), "uriBaseId": "%SRCROOT%"}


def _descriptor(info: CodeInfo) -> dict[str, object]:
    return {
        "id": info.code,
        "name": info.name,
        "shortDescription": {"text": info.summary or info.name},
        "fullDescription": {"text": info.summary or info.name},
        "help": {
            "text": info.doc or info.summary,
            "markdown": f"**{info.code} {info.name}**\n\n{info.doc}\n\n[Documentation]({info.url})",
        },
        "helpUri": info.url,
        "defaultConfiguration": {"level": LEVELS[info.severity]},
        "properties": {"tags": [info.family]},
    }


def _result(finding: Finding, index: Mapping[str, int]) -> dict[str, object]:
    result: dict[str, object] = {
        "ruleId": finding.code,
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": _artifact(finding.path),
                    "region": {
                        "startLine": finding.line,
                        "startColumn": finding.column,
                        "endLine": finding.end_line,
                        "endColumn": max(finding.end_column, 1),
                    },
                }
            }
        ],
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    if finding.data:
        result["properties"] = {"evidence": dict(finding.data)}
    return result


def sarif_document(document: Document) -> dict[str, object]:
    codes = list(document.codes)
    index = {info.code: position for position, info in enumerate(codes)}
    return sarif_log(
        [_descriptor(info) for info in codes],
        [_result(finding, index) for finding in document.findings],
        originalUriBaseIds={"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
        columnKind="unicodeCodePoints",
        invocations=[{"executionSuccessful": True}],
    )
