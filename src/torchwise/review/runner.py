"""Review many files: discovery, the project index, caching, workers, fixing.

Two passes, each once per file:

1. the index pass: every file of the run is parsed and summarised
   (:mod:`.summary`); the summaries are joined into a
   :class:`~torchwise.review.index.project.ProjectIndex`, with the project files the
   run's files import (summarised, not reviewed) and the torch version the
   project declares;
2. the rule pass: each file is analysed with the view of the index it can see.

Both are cached in ``.torchwise_cache/`` (:mod:`.cache`): an entry per file
content holds its summary and its findings keyed by the digest of its view of
the index, so a change to one file re-runs the rules only where the index says
it can matter; a record per run answers an unchanged project from ``stat``
calls alone. Files fan out over ``jobs`` worker processes when there are many;
with one job, the trees of the index pass are kept for the rule pass instead of
being parsed again.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchwise.findings import Applicability, Finding, Severity
from torchwise.review.analysis import FileAnalysis, analyse_source, parse
from torchwise.review.cache import ReviewCache
from torchwise.review.files import SourceFile, discover, read_source
from torchwise.review.fixes import fix_source
from torchwise.review.index.declared import Declarations
from torchwise.review.index.models import MainModel, main_model
from torchwise.review.index.project import ProjectIndex
from torchwise.review.index.records import ModuleSummary, TorchRange
from torchwise.review.index.summary import summarize_tree, unparsed
from torchwise.review.settings import ReviewSettings
from torchwise.review.workspace import Workspace

CACHE_DIR_NAME = ".torchwise_cache"
# Below this many files a process pool costs more than it saves.
_PARALLEL_THRESHOLD = 16
# With one job, parsed trees are kept from the index pass for the rule pass up
# to this many lines of source (beyond it, memory matters more than a re-parse).
_KEPT_TREE_LINES = 400_000
# Project files imported by the run but not part of it: how many to index.
_MAX_EXTRA_FILES = 400

Progress = Callable[[int], None]


@dataclass
class FileReport:
    path: str
    findings: list[Finding]
    lines: int = 0
    fixes_applied: int = 0
    original: str | None = None  # set when a fix changed the file
    fixed: str | None = None
    cached: bool = False
    #: Good practices the file shows: signal key -> lines (see :mod:`.praise`).
    praise: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class ReviewReport:
    files: list[FileReport] = field(default_factory=list)
    #: The project index the rules saw (None for a report read back from JSON).
    index: ProjectIndex | None = field(default=None, repr=False, compare=False)
    #: Files named explicitly but left out by ``exclude`` (with ``force_exclude``).
    excluded: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [finding for file in self.files for finding in file.findings]

    @property
    def lines(self) -> int:
        return sum(file.lines for file in self.files)

    @property
    def fixes_applied(self) -> int:
        return sum(file.fixes_applied for file in self.files)

    def main_model(self) -> MainModel | None:
        """The model of the reviewed files a tester would start with (needs the index)."""
        if self.index is None:
            return None
        return main_model(self.index, {file.path for file in self.files})


@dataclass(frozen=True)
class FixMode:
    """What to do with fixes: ``minimum`` applicability, and whether to write."""

    minimum: Applicability = Applicability.SAFE
    write: bool = True


def select_files(
    paths: Sequence[str | Path], settings: ReviewSettings, force_exclude: bool = False
) -> tuple[list[Path], list[str]]:
    """(files to review, explicitly named files left out by ``exclude``).

    Directories are walked and ``exclude`` applies to what they contain. A file
    named explicitly is reviewed even when ``exclude`` matches it, as ruff does;
    with ``force_exclude`` (pre-commit hooks pass every changed file) it is left
    out and reported back."""
    explicit = {Path(p) for p in paths if Path(p).is_file()}
    found = [path for path in discover(paths) if path not in explicit]
    files = {path for path in found if not settings.is_excluded(str(path))}
    excluded = []
    for path in sorted(explicit):
        if force_exclude and settings.is_excluded(str(path)):
            excluded.append(str(path))
        else:
            files.add(path)
    return sorted(files), excluded


def review_paths(
    paths: Sequence[str | Path],
    settings: ReviewSettings | None = None,
    *,
    fix: FixMode | None = None,
    jobs: int | None = None,
    cache_dir: Path | None = None,
    force_exclude: bool = False,
    progress: Progress | None = None,
    with_index: bool = True,
) -> ReviewReport:
    """Review every file under ``paths`` (default settings: the default rules).

    Raises TorchwiseError for a path that does not exist. ``progress`` is called
    with the number of files just finished, for a progress display. Without
    ``with_index``, the report may come without its project index (``index``
    None): an unchanged project is then answered from the cache's run record."""
    settings = settings or ReviewSettings()
    files, excluded = select_files(paths, settings, force_exclude)
    cache = ReviewCache(cache_dir, settings) if cache_dir is not None and fix is None else None
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    run = _Run(settings, cache, workers, progress)
    reports = run.review([str(path) for path in files], fix, with_index)
    return ReviewReport(reports, run.index, excluded)


def review_text(
    text: str,
    path: str,
    settings: ReviewSettings | None = None,
    *,
    fix: FixMode | None = None,
    workspace: Workspace | None = None,
) -> ReviewReport:
    """Review source that is not (or not yet) on disk, as if it were at ``path``:
    an editor's buffer sent on stdin. The project files it imports, found beside
    ``path``, are indexed; nothing is written, even when fixing.

    ``workspace`` (an editor session's): the project files are summarised only
    when their text changed since the last review, and unsaved buffers it holds
    are read instead of the disk."""
    settings = settings or ReviewSettings()
    tree = parse(text, path)
    if not isinstance(tree, ast.Module):
        analysis = analyse_source(text, path, settings)  # the syntax error, and what recovers
        return ReviewReport([FileReport(path, analysis.findings, text.count("\n"))])
    if workspace is not None:
        summaries = {path: workspace.summary(path, text, tree)}
        run = _Run(settings, None, 1, None, summary_of=workspace.summary)
    else:
        summaries = {path: summarize_tree(tree, text, path)}
        run = _Run(settings, None, 1, None)
    summaries.update(run._extra_files(summaries))
    index = ProjectIndex(summaries.values(), _torch_ranges(summaries, Declarations()))
    view = index.view(path)
    analysis = analyse_source(text, path, settings, view=view, tree=tree)
    report = _report(path, analysis, text)
    if fix is not None and any(f.fix for f in analysis.findings):

        def analyse(candidate: str) -> list[Finding]:
            return analyse_source(candidate, path, settings, view=view).findings

        fixed, count = fix_source(text, analyse, fix.minimum)
        if count and fixed != text:
            again = analyse_source(fixed, path, settings, view=view)
            report = _report(path, again, fixed, count, text)
    return ReviewReport([report], index)


def review_source(
    source: str, path: str = "<string>", settings: ReviewSettings | None = None
) -> list[Finding]:
    """Review one piece of source text (the library entry point for tools and tests).

    The text is its own project: classes and functions it defines are indexed."""
    settings = settings or ReviewSettings()
    return analyse_source(source, path, settings).findings


class _Run:
    """One review run: the index pass, then the rule pass, with the cache."""

    def __init__(
        self,
        settings: ReviewSettings,
        cache: ReviewCache | None,
        workers: int,
        progress: Progress | None,
        summary_of: Callable[[str], ModuleSummary] | None = None,
    ) -> None:
        self.settings = settings
        #: How a project file the run does not review is summarised (default: from disk).
        self.summary_of = summary_of
        self.cache = cache
        self.workers = workers
        self.progress = progress
        self.index: ProjectIndex | None = None
        self.trees: dict[str, ast.Module] = {}
        # (import as written, importer's directory) -> file: a package's files
        # import the same modules, each lookup costs several stat() calls, and a
        # warm run does nothing else as costly.
        self._located: dict[tuple[str, str], str | None] = {}
        self._files = _Files()
        self._declarations = Declarations()

    def review(self, paths: list[str], fix: FixMode | None, with_index: bool) -> list[FileReport]:
        cache = self.cache if fix is None else None
        if cache is not None and not with_index:
            answered = cache.answered_run(paths)
            if answered is not None:
                self._advance(len(paths))
                return [
                    FileReport(r.path, r.findings, r.lines, cached=True, praise=r.praise)
                    for r in answered
                ]
        started = time.time_ns()
        # Parsed trees are large, acyclic and long-lived: the cyclic garbage
        # collector would scan them again and again (it tripled the parse time on
        # timm). Frozen, they are left alone and still freed by reference counting.
        previous = gc.get_threshold()
        gc.set_threshold(*_GC_THRESHOLD)
        try:
            reports = self._review(paths, fix)
        finally:
            gc.unfreeze()
            gc.set_threshold(*previous)
        if cache is not None and self.index is not None:
            looked_at = [
                *self.index.summaries,
                *self._files.listed(),
                *map(str, self._declarations.consulted()),
            ]
            results = [((r.findings, r.praise), r.lines) for r in reports]
            cache.record_run(paths, results, looked_at, started)
        return reports

    def _review(self, paths: list[str], fix: FixMode | None) -> list[FileReport]:
        entries = {path: self.cache.get(Path(path)) if self.cache else None for path in paths}
        summaries = {path: e.summary for path, e in entries.items() if e is not None}
        missing = [path for path in paths if path not in summaries]
        summaries.update(self._summarise(missing, keep_trees=True))
        summaries.update(self._extra_files(summaries))
        ranges = _torch_ranges(summaries, self._declarations)
        self.index = index = ProjectIndex(summaries.values(), ranges)
        gc.freeze()  # the summaries and the index live as long as the run, like the trees

        reports: dict[str, FileReport] = {}
        todo: list[tuple[str, str]] = []  # (path, view digest)
        for path in paths:
            # The digest keys findings in the cache; without one it is not needed
            # (it walks the import graph and the project's saves).
            digest = index.digest(path, self._fingerprint(path)) if self.cache is not None else ""
            entry = entries.get(path)
            found = None if entry is None else entry.results.get(digest)
            if found is not None and fix is None:
                findings, praise = found
                lines = entry.lines if entry else 0
                reports[path] = FileReport(path, findings, lines, cached=True, praise=praise)
                self._advance(1)
            else:
                todo.append((path, digest))
        for report, digest in self._analyse(todo, index, fix):
            reports[report.path] = report
            if self.cache is not None and fix is None:
                summary = summaries[report.path]
                result = (report.findings, report.praise)
                self.cache.put(Path(report.path), summary, digest, report.lines, result)
        return [reports[path] for path in paths]

    # -- the index pass --------------------------------------------------------
    def _summarise(self, paths: list[str], keep_trees: bool) -> dict[str, ModuleSummary]:
        if self.workers > 1 and len(paths) >= _PARALLEL_THRESHOLD:
            from concurrent.futures import ProcessPoolExecutor  # ~10 ms: only when needed

            chunk = max(1, len(paths) // (self.workers * 4))
            with ProcessPoolExecutor(
                max_workers=self.workers, initializer=_init_gc_in_worker
            ) as pool:
                return dict(zip(paths, pool.map(_summary_of, paths, chunksize=chunk), strict=True))
        summaries = {}
        kept = 0
        for path in paths:
            if self.summary_of is not None:
                summaries[path] = self.summary_of(path)
                continue
            tree, summary = _parse_and_summarise(path)
            gc.freeze()
            summaries[path] = summary
            if keep_trees and tree is not None:
                lines = getattr(tree.body[-1], "end_lineno", 0) if tree.body else 0
                if kept + lines <= _KEPT_TREE_LINES:
                    self.trees[path] = tree
                    kept += lines
        return summaries

    def _extra_files(self, summaries: dict[str, ModuleSummary]) -> dict[str, ModuleSummary]:
        """Project files the run imports without reviewing them (``review train.py``
        still knows ``models.py``): found next to the importer, summarised only."""
        extra: dict[str, ModuleSummary] = {}
        pending = dict(summaries)
        while pending and len(extra) < _MAX_EXTRA_FILES:
            wanted: set[str] = set()
            for path, summary in pending.items():
                for written in [*summary.imports.values(), *summary.star_imports]:
                    found = self._locate(written, path)
                    if found is None or found in summaries or found in extra:
                        continue
                    if not self.settings.is_excluded(found):
                        wanted.add(found)
            found_now = self._summarise(sorted(wanted)[: _MAX_EXTRA_FILES - len(extra)], False)
            extra.update(found_now)
            pending = found_now
            summaries = {**summaries, **found_now}
        return extra

    def _locate(self, written: str, importer: str) -> str | None:
        key = (written, os.path.dirname(importer))
        if key not in self._located:
            self._located[key] = _local_module(written, importer, self._files)
        return self._located[key]

    # -- the rule pass -----------------------------------------------------------
    def _analyse(
        self, todo: list[tuple[str, str]], index: ProjectIndex, fix: FixMode | None
    ) -> Iterable[tuple[FileReport, str]]:
        if self.workers > 1 and len(todo) >= _PARALLEL_THRESHOLD:
            from concurrent.futures import ProcessPoolExecutor

            paths = [path for path, _ in todo]
            chunk = max(1, len(paths) // (self.workers * 4))
            with ProcessPoolExecutor(
                max_workers=self.workers,
                initializer=_init_worker,
                initargs=(list(index.summaries.values()), index.torch_ranges, self.settings),
            ) as pool:
                for (_, digest), report in zip(
                    todo,
                    pool.map(_review_in_worker, paths, [fix] * len(paths), chunksize=chunk),
                    strict=True,
                ):
                    self._advance(1)
                    yield report, digest
            return
        for path, digest in todo:
            tree = self.trees.pop(path, None)
            if tree is None:
                tree = _parse_tree(path)
                gc.freeze()
            report = _review_one(path, self.settings, fix, index, tree)
            self._advance(1)
            yield report, digest

    def _fingerprint(self, path: str) -> str:
        enabled = ",".join(sorted(self.settings.enabled_for(path)))
        return f"{enabled}|{self.settings.min_torch_version}"

    def _advance(self, count: int) -> None:
        if self.progress is not None:
            self.progress(count)


def _parse_and_summarise(path: str) -> tuple[ast.Module | None, ModuleSummary]:
    try:
        source_file = read_source(Path(path))
    except ValueError:
        return None, unparsed(path)
    tree = parse(source_file.source, path)
    if not isinstance(tree, ast.Module):
        return None, unparsed(path, source_file.source)
    return tree, summarize_tree(tree, source_file.source, path)


def project_imports(path: str, text: str | None = None) -> list[str]:
    """The project files ``path`` imports (found beside it, or beside its top
    package, as Python's path would find them), as a review indexes them."""
    if text is None:
        try:
            text = read_source(Path(path)).source
        except ValueError:
            return []
    tree = parse(text, path)
    if not isinstance(tree, ast.Module):
        return []
    return imported_files(path, summarize_tree(tree, text, path))


def imported_files(path: str, summary: ModuleSummary) -> list[str]:
    """The project files a summarised file imports."""
    files = _Files()
    found = {
        _local_module(written, path, files)
        for written in [*summary.imports.values(), *summary.star_imports]
    }
    return sorted(file for file in found if file is not None and file != path)


def _parse_tree(path: str) -> ast.Module | None:
    try:
        parsed = parse(read_source(Path(path)).source, path)
    except ValueError:
        return None
    return parsed if isinstance(parsed, ast.Module) else None


def _summary_of(path: str) -> ModuleSummary:
    return _parse_and_summarise(path)[1]


class _Files:
    """Which files each directory holds, listed once per run: resolving a
    package's imports asks about the same few directories thousands of times."""

    def __init__(self) -> None:
        self._listed: dict[str, frozenset[str]] = {}

    def has(self, directory: str, name: str) -> bool:
        listed = self._listed.get(directory)
        if listed is None:
            try:
                with os.scandir(directory or ".") as entries:
                    listed = frozenset(e.name for e in entries if e.is_file())
            except OSError:
                listed = frozenset()
            self._listed[directory] = listed
        return name in listed

    def listed(self) -> list[str]:
        """The directories listed so far."""
        return list(self._listed)


def _local_module(written: str, importer: str, files: _Files | None = None) -> str | None:
    """The file a project import names, looked for beside the importer (and, for
    a package, beside its top package), as Python's path would find it."""
    if written.startswith("<") or written.split(".", 1)[0] in {"torch", "numpy", "torchvision"}:
        return None
    files = files or _Files()
    here = os.path.dirname(importer)
    if written.startswith("."):
        level = len(written) - len(written.lstrip("."))
        base = here
        for _ in range(level - 1):
            base = os.path.dirname(base)
        parts = [p for p in written[level:].split(".") if p]
        roots = [base]
    else:
        parts = written.split(".")
        top = here
        while files.has(top, "__init__.py") and os.path.dirname(top) != top:
            top = os.path.dirname(top)
        roots = [here] if top == here else [here, top]
    for root in roots:
        for length in range(len(parts), 0, -1):
            *inner, last = parts[:length]
            directory = os.path.join(root, *inner)
            if files.has(directory, f"{last}.py"):
                return os.path.join(directory, f"{last}.py")
            package = os.path.join(directory, last)
            if files.has(package, "__init__.py"):
                return os.path.join(package, "__init__.py")
    return None


def _torch_ranges(
    summaries: dict[str, ModuleSummary], declarations: Declarations
) -> dict[str, TorchRange]:
    ranges: dict[str, TorchRange] = {}
    for directory in {str(Path(path).parent) for path in summaries}:
        found = declarations.nearest(Path(directory))
        if found is not None:
            ranges[directory] = found[1]
    return ranges


# -- workers -----------------------------------------------------------------------
_WORKER: dict[str, object] = {}

#: The collector's pace during a review. Each file's pass makes hundreds of
#: thousands of small objects (facts, values, summaries) and few reference
#: cycles; at the default (a collection every 700 allocations, the older
#: generations every 10) it spent a tenth of a cold run on timm re-scanning
#: them. mypy raises it for the same reason.
_GC_THRESHOLD = (100_000, 50, 100)


def _init_gc_in_worker() -> None:
    gc.set_threshold(*_GC_THRESHOLD)  # a worker process of the run: nothing to restore


def _init_worker(
    summaries: list[ModuleSummary], ranges: dict[str, TorchRange], settings: ReviewSettings
) -> None:
    _WORKER["index"] = ProjectIndex(summaries, ranges)
    _WORKER["settings"] = settings
    gc.freeze()  # long-lived: the collector need not scan them at every file
    _init_gc_in_worker()


def _review_in_worker(path: str, fix: FixMode | None) -> FileReport:
    index = _WORKER["index"]
    settings = _WORKER["settings"]
    assert isinstance(index, ProjectIndex) and isinstance(settings, ReviewSettings)
    return _review_one(path, settings, fix, index, None)


def _review_one(
    path: str,
    settings: ReviewSettings,
    fix: FixMode | None,
    index: ProjectIndex,
    tree: ast.Module | None,
) -> FileReport:
    try:
        source_file = read_source(Path(path))
    except ValueError as exc:
        return FileReport(path, [_unreadable(path, str(exc))])
    view = index.view(path)
    source = source_file.source
    analysis = analyse_source(source, path, settings, view=view, tree=tree)
    if source_file.is_notebook:
        analysis.findings = _map_cells(analysis.findings, source_file)
        return _report(path, analysis, source)
    report = _report(path, analysis, source)
    findings = analysis.findings
    if fix is None or not any(f.fix for f in findings) or any(f.code == "TW000" for f in findings):
        return report  # nothing to fix, or a file we never touch (it does not parse)

    def analyse(text: str) -> list[Finding]:
        return analyse_source(text, path, settings, view=view).findings

    fixed, count = fix_source(source, analyse, fix.minimum)
    if count and fixed != source:
        ast.parse(fixed)  # fix_source guarantees this; never write a broken file
        if fix.write:
            Path(path).write_text(fixed, encoding="utf-8")
        report = _report(
            path, analyse_source(fixed, path, settings, view=view), fixed, count, source
        )
    return report


def _report(
    path: str,
    analysis: FileAnalysis,
    text: str,
    fixes_applied: int = 0,
    original: str | None = None,
) -> FileReport:
    """The report of one analysed file (``original``: the text before fixes, which
    ``text`` then holds the result of)."""
    return FileReport(
        path,
        analysis.findings,
        text.count("\n"),
        fixes_applied,
        original,
        text if original is not None else None,
        praise=analysis.praise.lines,
    )


def _unreadable(path: str, reason: str) -> Finding:
    return Finding("TW000", f"file could not be read: {reason}", path, 1, 1, 1, 1, Severity.ERROR)


def _map_cells(findings: Iterable[Finding], source_file: SourceFile) -> list[Finding]:
    assert source_file.cells is not None
    mapped = []
    for finding in findings:
        index = min(max(finding.line, 1), len(source_file.cells)) - 1
        cell, cell_line = source_file.cells[index] if source_file.cells else (1, 1)
        mapped.append(dataclasses.replace(finding, cell=cell, cell_line=cell_line))
    return mapped
