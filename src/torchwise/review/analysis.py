"""One file's review, from its source text: parse it (recovering from a few
stray lines Python rejects), walk it with the rules, apply ``noqa``.

The project view the walk asks is the runner's to give: the project index's
view of the file, or, for a file reviewed on its own, a view built from the
file alone (its classes and functions indexed first). A file recovered from a
syntax error is always its own project: the index summarised it unparsed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from torchwise.findings import Finding, Severity
from torchwise.review.engine.view import ProjectView
from torchwise.review.engine.walk import analyse_tree
from torchwise.review.index.project import ProjectIndex
from torchwise.review.index.summary import summarize_tree
from torchwise.review.praise import Praise, PraiseObserver
from torchwise.review.settings import ReviewSettings
from torchwise.review.suppression import file_suppressions, line_suppressions, suppressed

#: How many lines recovery may comment out before giving up on a file.
_RECOVERY_LINES = 8


@dataclass
class FileAnalysis:
    """What one pass over a file found: its findings (``noqa`` applied, sorted)
    and the good practices it shows (for the written review)."""

    findings: list[Finding]
    praise: Praise = field(default_factory=Praise)


def analyse_source(
    source: str,
    path: str,
    settings: ReviewSettings,
    *,
    view: ProjectView | None = None,
    tree: ast.Module | None = None,
    enabled: frozenset[str] | None = None,
) -> FileAnalysis:
    """Review ``source`` as the file at ``path``.

    ``view`` is the project as this file sees it; None: the file is its own
    project. ``tree``, when the caller parsed the source already, saves a parse.
    ``enabled``: the rules to run (default: what ``settings`` enables here)."""
    enabled = settings.enabled_for(path) if enabled is None else enabled
    file_noqa = file_suppressions(source)
    if file_noqa is not None and not file_noqa:
        return FileAnalysis([])  # "# torchwise: noqa" on its own line skips the whole file
    broken: Finding | None = None
    if tree is None:
        parsed = parse(source, path)
        if isinstance(parsed, Finding):
            recovered = recover(source, path)
            if recovered is None:
                return FileAnalysis([parsed])
            # Report the syntax error, and review the rest of the file as a
            # reader would: the lines around the error are still a program.
            broken, (source, tree), view = parsed, recovered, None
        else:
            tree = parsed
    if view is None:
        view = own_view(tree, source, path)
    observer = PraiseObserver()
    findings = analyse_tree(tree, source, path, enabled, settings, view, (observer,))
    if broken is not None:
        # Lines read as comments may have bound names: TW001 cannot tell here.
        findings = [f for f in findings if f.code != "TW001"]
        findings.append(broken)
    suppressed_in_file = file_noqa or frozenset()
    line_noqa = line_suppressions(source.splitlines(keepends=True))
    kept = [
        finding
        for finding in findings
        if finding.code not in suppressed_in_file and not suppressed(finding, line_noqa)
    ]
    return FileAnalysis(sorted(set(kept), key=Finding.sort_key), observer.praise)


def own_view(tree: ast.Module, source: str, path: str) -> ProjectView:
    """The view of a file that is its own project."""
    return ProjectIndex([summarize_tree(tree, source, path)]).view(path)


def parse(source: str, path: str) -> ast.Module | Finding:
    """The file's tree, or the TW000 finding that says why there is none."""
    try:
        return ast.parse(source, filename=path, type_comments=False)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return syntax_finding(path, exc)


#: How many lines recovery may comment out before giving up on a file.
_RECOVERY_LINES = 8


def recover(source: str, path: str) -> tuple[str, ast.Module] | None:
    """The source with the lines Python rejects commented out, and its tree, when
    a few such lines are all that stand in the way (a stray `try:jupyter`, a
    leftover merge marker); line numbers are kept. None when it takes more."""
    lines = source.split("\n")
    for _ in range(_RECOVERY_LINES):
        text = "\n".join(lines)
        try:
            return text, ast.parse(text, filename=path, type_comments=False)
        except SyntaxError as exc:
            number = exc.lineno
            if number is None or not 1 <= number <= len(lines) or lines[number - 1].startswith("#"):
                return None
            lines[number - 1] = "#" + lines[number - 1]
        except (ValueError, MemoryError, RecursionError):
            return None
    return None


def syntax_finding(path: str, exc: BaseException) -> Finding:
    line = getattr(exc, "lineno", None) or 1
    column = getattr(exc, "offset", None) or 1
    message = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    return Finding(
        code="TW000",
        message=f"file could not be parsed: {message}",
        path=path,
        line=line,
        column=max(column, 1),
        end_line=line,
        end_column=max(column, 1),
        severity=Severity.ERROR,
    )
