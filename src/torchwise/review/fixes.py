"""Applying fixes: sorted, non-overlapping text edits, verified by re-parsing.

Fixes are applied in rounds, as in ruff: one round applies every fix whose
edits do not overlap an earlier one; the file is analysed again and the next
round picks up what was left (or what the first round made fixable), until a
round changes nothing. A round whose result does not parse is thrown away.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from torchwise.findings import Applicability, Edit, Finding

MAX_ROUNDS = 10


def fixable(finding: Finding, minimum: Applicability) -> bool:
    return finding.fix is not None and finding.fix.applicability.rank >= minimum.rank


def apply_edits(
    source: str, findings: Sequence[Finding], minimum: Applicability
) -> tuple[str, int]:
    """Apply the fixes of ``findings`` that do not overlap; return (text, fixes applied)."""
    chosen: list[Edit] = []
    taken: list[tuple[int, int]] = []
    applied = 0
    for finding in findings:
        if not fixable(finding, minimum):
            continue
        assert finding.fix is not None
        edits = sorted(finding.fix.edits)
        if any(_overlaps(edit, span) for edit in edits for span in taken):
            continue  # the next round will get it
        chosen.extend(edits)
        taken.extend((edit.start, max(edit.end, edit.start + 1)) for edit in edits)
        applied += 1
    for edit in sorted(chosen, reverse=True):
        source = source[: edit.start] + edit.text + source[edit.end :]
    return source, applied


def _overlaps(edit: Edit, span: tuple[int, int]) -> bool:
    end = max(edit.end, edit.start + 1)
    return edit.start < span[1] and span[0] < end


def fix_source(
    source: str,
    analyse: Callable[[str], list[Finding]],
    minimum: Applicability,
) -> tuple[str, int]:
    """Fix ``source`` to a fixed point. ``analyse`` re-reviews a candidate text.

    Returns the fixed text and the number of fixes applied. The result always
    parses: a round that would break the file is discarded and fixing stops.
    """
    total = 0
    findings = analyse(source)
    for _ in range(MAX_ROUNDS):
        candidate, applied = apply_edits(source, findings, minimum)
        if applied == 0 or candidate == source:
            break
        try:
            ast.parse(candidate)
        except (SyntaxError, ValueError):
            break
        source, total = candidate, total + applied
        findings = analyse(source)
    return source, total
