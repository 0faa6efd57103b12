"""``--format json``: one stable, documented object (see docs/review.md).

The schema is a public contract: ``schema_version`` changes only when a field
is removed or changes meaning; new fields may appear in any version.
"""

from __future__ import annotations

import json
from collections import Counter

from torchwise import __version__
from torchwise.findings import Applicability, Finding, Severity, finding_to_dict
from torchwise.review.output import RenderOptions
from torchwise.review.registry import get_rule
from torchwise.review.runner import ReviewReport

SCHEMA_VERSION = 1


def summary(report: ReviewReport) -> dict[str, object]:
    """Counts for the whole run: files, lines, findings by severity and code, fixes."""
    findings = report.findings
    by_severity = Counter(finding.severity.value for finding in findings)
    by_code = Counter(finding.code for finding in findings)
    fixable = Counter(
        finding.fix.applicability.value for finding in findings if finding.fix is not None
    )
    return {
        "files": len(report.files),
        "files_with_findings": sum(1 for file in report.files if file.findings),
        "lines": report.lines,
        "findings": len(findings),
        "by_severity": {level.value: by_severity[level.value] for level in Severity},
        "by_code": dict(sorted(by_code.items())),
        "fixable": {
            "safe": fixable[Applicability.SAFE.value],
            "unsafe": fixable[Applicability.UNSAFE.value],
        },
        "fixes_applied": report.fixes_applied,
    }


def finding_json(finding: Finding) -> dict[str, object]:
    """:func:`finding_to_dict` plus what a reader wants without a rule lookup."""
    info = get_rule(finding.code)
    return {
        **finding_to_dict(finding),
        "name": info.name if info is not None else "",
        "location": finding.location,
    }


def render(report: ReviewReport, options: RenderOptions) -> str:
    document = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "torchwise", "version": __version__},
        "summary": summary(report),
        "findings": [finding_json(finding) for finding in report.findings],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
