"""``--format text``: ``path:line:col: TW101 message``, then a summary by code."""

from __future__ import annotations

from collections import Counter

from torchwise.findings import Applicability, Severity
from torchwise.review.output import RenderOptions
from torchwise.review.registry import get_rule
from torchwise.review.runner import ReviewReport

_COLORS = {Severity.ERROR: "\x1b[31m", Severity.WARNING: "\x1b[33m", Severity.INFO: "\x1b[36m"}
_BOLD, _DIM, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


def render(report: ReviewReport, options: RenderOptions) -> str:
    def paint(text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if options.color else text

    lines: list[str] = []
    for finding in report.findings:
        code = paint(finding.code, _BOLD + _COLORS[finding.severity])
        marker = ""
        if options.show_fixes and finding.fix is not None:
            if finding.fix.applicability is Applicability.SAFE:
                marker = paint(" [*]", _DIM)
            elif finding.fix.applicability is Applicability.UNSAFE:
                marker = paint(" [unsafe fix]", _DIM)
        lines.append(f"{paint(finding.location, _BOLD)}: {code}{marker} {finding.message}")

    findings = report.findings
    files = len(report.files)
    if not options.statistics:
        return "\n".join(lines)
    if lines:
        lines.append("")
    applied = report.fixes_applied
    fixed_note = f"Applied {applied} fix{'es' * (applied != 1)}." if applied else ""
    if not findings:
        lines.append(f"No problems found in {files} file{'s' * (files != 1)}.")
        if fixed_note:
            lines.append(fixed_note)
        return "\n".join(lines)
    by_code = Counter(finding.code for finding in findings)
    width = max(len(str(count)) for count in by_code.values())
    for code, count in sorted(by_code.items(), key=lambda item: (-item[1], item[0])):
        info = get_rule(code)
        name = info.name if info else ""
        lines.append(f"{count:>{width}}  {paint(code, _BOLD)}  {name}")
    severities = Counter(finding.severity for finding in findings)
    summary = ", ".join(
        f"{severities[level]} {level.value}{'s' * (severities[level] != 1)}"
        for level in Severity
        if severities[level]
    )
    lines.append(
        f"Found {len(findings)} problem{'s' * (len(findings) != 1)} ({summary}) "
        f"in {files} file{'s' * (files != 1)}."
    )
    safe = sum(
        1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.SAFE
    )
    unsafe = sum(
        1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.UNSAFE
    )
    if safe:
        lines.append(f"[*] {safe} fixable with `torchwise review --fix`.")
    if unsafe:
        lines.append(f"{unsafe} more fixable with `--fix --unsafe-fixes` (review them).")
    if fixed_note:
        lines.append(fixed_note)
    return "\n".join(lines)
