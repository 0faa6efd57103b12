"""``--format sarif``: SARIF 2.1.0, as GitHub code scanning and IDEs read it.

Every registered rule is described once in ``tool.driver.rules`` (name, short
and full description, the rule's documentation as help markdown, a link to
``docs/rules/<family>.md#twxxx``, the default level); each finding is a result
that points at it by ``ruleIndex``. Security rules (TW3xx) carry the
``security-severity`` score and ``security`` tag that code scanning ranks by.

Paths are relative to the working directory (``%SRCROOT%``). A notebook finding
points at the ``.ipynb`` file without a line region (the JSON's lines are not
the cell's) and names the cell in a logical location and in the message.
"""

from __future__ import annotations

import json
from pathlib import Path

from torchwise.findings import Finding, Severity
from torchwise.review.output import RenderOptions
from torchwise.review.registry import FAMILIES, RuleInfo, all_rules, section
from torchwise.review.runner import ReviewReport
from torchwise.sarif import sarif_log

LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
# CVSS-like scores GitHub maps to critical/high/medium/low for security rules.
SECURITY_SEVERITY = {Severity.ERROR: "8.8", Severity.WARNING: "5.5", Severity.INFO: "3.0"}


def rule_url(info: RuleInfo) -> str:
    """Where a rule's documentation lives."""
    return info.url


def is_security(info: RuleInfo) -> bool:
    return info.code.startswith("TW3")


def _rule_descriptor(info: RuleInfo) -> dict[str, object]:
    what = " ".join(section(info.doc, "## What it does").split())
    tags = [info.family]
    properties: dict[str, object] = {"tags": tags, "precision": "high"}
    if is_security(info):
        tags = properties["tags"] = sorted({*tags, "security"})
        properties["security-severity"] = SECURITY_SEVERITY[info.severity]
    help_markdown = (
        f"**{info.code} {info.name}**\n\n{info.doc}\n\n[Documentation]({rule_url(info)})"
    )
    return {
        "id": info.code,
        "name": info.name,
        "shortDescription": {"text": info.summary or info.name},
        "fullDescription": {"text": what or info.summary or info.name},
        "help": {"text": info.doc or info.summary, "markdown": help_markdown},
        "helpUri": rule_url(info),
        "defaultConfiguration": {
            "enabled": info.default_enabled,
            "level": LEVELS[info.severity],
        },
        "properties": properties,
    }


def artifact_uri(path: str) -> tuple[str, str | None]:
    """(uri, uriBaseId): relative to the working directory when the file is under it."""
    absolute = Path(path).resolve()
    try:
        relative = absolute.relative_to(Path.cwd().resolve())
    except ValueError:
        return absolute.as_uri(), None
    return relative.as_posix(), "%SRCROOT%"


def _location(finding: Finding) -> dict[str, object]:
    uri, base = artifact_uri(finding.path)
    artifact: dict[str, object] = {"uri": uri}
    if base is not None:
        artifact["uriBaseId"] = base
    physical: dict[str, object] = {"artifactLocation": artifact}
    location: dict[str, object] = {"physicalLocation": physical}
    if finding.cell is None:
        physical["region"] = {
            "startLine": finding.line,
            "startColumn": finding.column,
            "endLine": finding.end_line,
            "endColumn": max(finding.end_column, 1),
        }
    else:
        location["logicalLocations"] = [
            {
                "name": f"cell {finding.cell}",
                "fullyQualifiedName": f"{uri}:cell {finding.cell}:{finding.cell_line}",
                "kind": "module",
            }
        ]
    return location


def _fixes(finding: Finding, artifact: dict[str, object]) -> list[dict[str, object]]:
    # Edit offsets refer to the file's text; a notebook's joined cells are not its text.
    if finding.fix is None or finding.cell is not None:
        return []
    replacements = [
        {
            "deletedRegion": {"charOffset": edit.start, "charLength": edit.end - edit.start},
            "insertedContent": {"text": edit.text},
        }
        for edit in finding.fix.edits
    ]
    return [
        {
            "description": {"text": f"{finding.fix.title} ({finding.fix.applicability.value} fix)"},
            "artifactChanges": [{"artifactLocation": artifact, "replacements": replacements}],
        }
    ]


def _result(finding: Finding, index: dict[str, int]) -> dict[str, object]:
    message = finding.message
    if finding.cell is not None:
        message = f"{message} (cell {finding.cell}, line {finding.cell_line})"
    location = _location(finding)
    result: dict[str, object] = {
        "ruleId": finding.code,
        "level": LEVELS[finding.severity],
        "message": {"text": message},
        "locations": [location],
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    physical = location["physicalLocation"]
    assert isinstance(physical, dict)
    fixes = _fixes(finding, physical["artifactLocation"])
    if fixes:
        result["fixes"] = fixes
    return result


def sarif_document(report: ReviewReport) -> dict[str, object]:
    rules = list(all_rules().values())
    index = {info.code: position for position, info in enumerate(rules)}
    return sarif_log(
        [_rule_descriptor(info) for info in rules],
        [_result(finding, index) for finding in report.findings],
        originalUriBaseIds={"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
        columnKind="unicodeCodePoints",
        invocations=[{"executionSuccessful": True}],
        properties={"families": dict(FAMILIES)},
    )


def render(report: ReviewReport, options: RenderOptions) -> str:
    return json.dumps(sarif_document(report), indent=2, ensure_ascii=False)


__all__ = ["artifact_uri", "render", "rule_url", "sarif_document"]
