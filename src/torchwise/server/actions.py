"""Code actions: a finding's fix, a ``# noqa`` comment, and "fix all" for a file.

Every edit offered is checked first: the document with the edit applied must
still parse (a fix, a ``noqa`` comment after a line that ends inside a string
or after a backslash continuation, would not), so accepting an action never
breaks a file; in a file that does not parse already, a ``noqa`` comment must
still tokenize as a comment. Only safe fixes are offered unless the editor asked for unsafe
ones too (``unsafe_fixes``); "fix all" applies review's safe fixes in rounds
until nothing changes, as ``torchwise review --fix`` does.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence

from lsprotocol import types

from torchwise.review import Applicability, Edit, Finding, FixMode, review_text
from torchwise.server.analysis import Analysis, Placer
from torchwise.server.diagnostics import SOURCE

FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"

_NOQA = re.compile(r"#\s*noqa:\s*TW\d{3}(?:[\s,]+TW\d{3})*", re.I)


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _apply(text: str, edits: Sequence[Edit]) -> str:
    for edit in sorted(edits, reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return text


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether the editor asked for actions of ``kind`` (``only`` holds prefixes)."""
    if not only:
        return True
    return any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


def _workspace_edit(placer: Placer, edits: Sequence[Edit]) -> types.WorkspaceEdit | None:
    changes: dict[str, list[types.TextEdit]] = {}
    for edit in edits:
        place = placer.place(edit.start, edit.end)
        if place is None:
            return None  # across notebook cells: not offered
        range_ = place.index.range(place.start, place.end)
        changes.setdefault(place.uri, []).append(types.TextEdit(range=range_, new_text=edit.text))
    return types.WorkspaceEdit(changes=changes)


def fix_action(
    analysis: Analysis, placer: Placer, finding: Finding, diagnostic: types.Diagnostic | None
) -> types.CodeAction | None:
    fix = finding.fix
    if fix is None or fix.applicability is Applicability.DISPLAY:
        return None
    if not _parses(_apply(analysis.source.text, fix.edits)):
        return None
    edit = _workspace_edit(placer, fix.edits)
    if edit is None:
        return None
    safe = fix.applicability is Applicability.SAFE
    return types.CodeAction(
        title=f"{fix.title} ({finding.code})" if safe else f"{fix.title} ({finding.code}, unsafe)",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic] if diagnostic is not None else None,
        is_preferred=safe,
        edit=edit,
    )


def noqa_action(
    analysis: Analysis, placer: Placer, finding: Finding, diagnostic: types.Diagnostic | None
) -> types.CodeAction | None:
    """``# noqa: TWxxx`` on the finding's first line (or its last, when a comment
    cannot end the first), added to a ``noqa`` list already there."""
    text = analysis.source.text
    index = placer.joined
    for line in dict.fromkeys((finding.line - 1, finding.end_line - 1)):
        if not 0 <= line < index.line_count:
            continue
        edit = _noqa_edit(index.line_text(line), index.starts[line], finding.code)
        candidate = _apply(text, [edit])
        # A file review read with a few lines commented out (TW000) need not parse.
        parses = _parses(candidate) or not _parses(text)
        if parses and _comment_on(candidate, line + 1, finding.code):
            workspace_edit = _workspace_edit(placer, [edit])
            if workspace_edit is None:
                return None
            return types.CodeAction(
                title=f"Disable {finding.code} for this line (# noqa: {finding.code})",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic] if diagnostic is not None else None,
                edit=workspace_edit,
            )
    return None


def _noqa_edit(line: str, line_start: int, code: str) -> Edit:
    existing = _NOQA.search(line)
    if existing is not None:  # a list already there gets the code: TW101 -> TW101, TW102
        return Edit(line_start + existing.end(), line_start + existing.end(), f", {code}")
    kept = len(line.rstrip())
    return Edit(line_start + kept, line_start + len(line), f"  # noqa: {code}")


def _comment_on(text: str, line: int, code: str) -> bool:
    """Whether ``line`` of ``text`` ends in a real comment naming ``code``."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    return any(
        token.type == tokenize.COMMENT and token.start[0] == line and code in token.string.upper()
        for token in tokens
    )


def fix_all_action(analysis: Analysis, placer: Placer) -> types.CodeAction | None:
    """Every safe fix at once, in rounds as ``review --fix`` applies them (files only:
    in a notebook, one fix per finding stays available)."""
    source = analysis.source
    if source.cells is not None or not any(
        f.fix is not None and f.fix.applicability is Applicability.SAFE for f in analysis.findings
    ):
        return None
    report = review_text(source.text, source.path, analysis.settings, fix=FixMode(write=False))
    fixed = report.files[0].fixed if report.files else None
    if fixed is None or fixed == source.text or not _parses(fixed):
        return None
    edit = _minimal_edit(source.text, fixed)
    return types.CodeAction(
        title=f"{SOURCE}: fix all safe problems",
        kind=FIX_ALL_KIND,
        edit=_workspace_edit(placer, [edit]),
    )


def _minimal_edit(old: str, new: str) -> Edit:
    """One edit that turns ``old`` into ``new``: their common prefix and suffix are kept
    (so the editor keeps the cursor and folds outside the change)."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return Edit(prefix, len(old) - suffix, new[prefix : len(new) - suffix])
