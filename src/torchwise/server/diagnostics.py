"""Findings as the editor shows them: diagnostics, and the rule's documentation
on hover.

A diagnostic carries the rule's code (``TW101``) with a link to its page in the
rule docs, its name (``missing-zero-grad``, after the message, as pylint shows
its symbols), review's severity (error, warning, info -> Error, Warning,
Information), and ``source: torchwise``. Deprecated-API findings are tagged
deprecated, which editors draw struck through.
"""

from __future__ import annotations

from lsprotocol import types

from torchwise.review import Finding, Severity, get_rule
from torchwise.sarif import REPOSITORY
from torchwise.server.analysis import Analysis, Placer

SOURCE = "torchwise"

_SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}


def rule_url(code: str) -> str | None:
    """The rule's section of its family's page in ``docs/rules`` (as SARIF links it)."""
    info = get_rule(code)
    if info is None:
        return None
    return f"{REPOSITORY}/blob/main/docs/rules/{info.family}.md#{code.lower()}"


def diagnostic(finding: Finding, range_: types.Range) -> types.Diagnostic:
    info = get_rule(finding.code)
    url = rule_url(finding.code)
    deprecated = info is not None and info.family == "deprecated"
    return types.Diagnostic(
        range=range_,
        message=f"{finding.message} ({info.name})" if info is not None else finding.message,
        severity=_SEVERITIES[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=url) if url else None,
        source=SOURCE,
        tags=[types.DiagnosticTag.Deprecated] if deprecated else None,
        data={"code": finding.code, "name": info.name if info is not None else ""},
    )


def diagnostics_by_uri(analysis: Analysis, placer: Placer) -> dict[str, list[types.Diagnostic]]:
    """Every editor document of the analysis with its diagnostics ([] clears them)."""
    published: dict[str, list[types.Diagnostic]] = {uri: [] for uri in analysis.source.uris()}
    for finding in analysis.findings:
        place = placer.place(*placer.finding_span(finding))
        if place is None:  # a finding across notebook cells: shown where it starts
            start, _ = placer.finding_span(finding)
            place = placer.place(start, start)
        if place is not None:
            range_ = place.index.range(place.start, place.end)
            published.setdefault(place.uri, []).append(diagnostic(finding, range_))
    return published


def hover_text(findings: list[Finding]) -> str:
    """The documentation of the rules of ``findings``, in Markdown, each once."""
    parts = []
    for code in dict.fromkeys(finding.code for finding in findings):
        info = get_rule(code)
        if info is None:
            continue
        url = rule_url(code)
        title = f"**{code}** `{info.name}` ({info.severity.value})"
        link = f" · [rule docs]({url})" if url else ""
        parts.append(f"{title}{link}\n\n{_demote_headings(info.doc)}")
    return "\n\n---\n\n".join(parts)


def _demote_headings(doc: str) -> str:
    """A rule doc's ``## What it does`` headings as ``#### ...``: a hover is small."""
    return "\n".join("##" + line if line.startswith("## ") else line for line in doc.splitlines())
