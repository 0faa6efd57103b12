"""Review many files: discovery, caching, parallel workers, fixing.

The unit of work is one file: read it, analyse it, optionally fix it. Files
are independent, so they fan out over ``jobs`` worker processes; results come
back in path order. Unchanged files are answered from the content-hash cache
(``.torchwise_cache/``) without being parsed again.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from torchwise import __version__
from torchwise.review.engine import analyse_source
from torchwise.review.files import SourceFile, discover, read_source
from torchwise.review.findings import (
    Applicability,
    Finding,
    Severity,
    finding_from_dict,
    finding_to_dict,
)
from torchwise.review.fixes import fix_source
from torchwise.review.settings import ReviewSettings

CACHE_DIR_NAME = ".torchwise_cache"
# Below this many files a process pool costs more than it saves.
_PARALLEL_THRESHOLD = 16


@dataclass
class FileReport:
    path: str
    findings: list[Finding]
    lines: int = 0
    fixes_applied: int = 0
    original: str | None = None  # set when a fix changed the file
    fixed: str | None = None
    cached: bool = False


@dataclass
class ReviewReport:
    files: list[FileReport] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [finding for file in self.files for finding in file.findings]

    @property
    def lines(self) -> int:
        return sum(file.lines for file in self.files)

    @property
    def fixes_applied(self) -> int:
        return sum(file.fixes_applied for file in self.files)


@dataclass(frozen=True)
class FixMode:
    """What to do with fixes: ``minimum`` applicability, and whether to write."""

    minimum: Applicability = Applicability.SAFE
    write: bool = True


def review_paths(
    paths: Sequence[str | Path],
    settings: ReviewSettings,
    *,
    fix: FixMode | None = None,
    jobs: int | None = None,
    cache_dir: Path | None = None,
) -> ReviewReport:
    """Review every file under ``paths``; raises TorchwiseError for a missing path."""
    files = [path for path in discover(paths) if not settings.is_excluded(str(path))]
    explicit = {Path(p) for p in paths if Path(p).is_file()}
    files = sorted(set(files) | {p for p in explicit if not settings.is_excluded(str(p))})
    cache = _Cache(cache_dir, settings) if cache_dir is not None and fix is None else None

    reports: dict[str, FileReport] = {}
    todo: list[str] = []
    for path in files:
        hit = cache.get(path) if cache else None
        if hit is not None:
            reports[str(path)] = hit
        else:
            todo.append(str(path))

    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if workers > 1 and len(todo) >= _PARALLEL_THRESHOLD:
        chunk = max(1, len(todo) // (workers * 4))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = pool.map(
                _review_one, todo, [settings] * len(todo), [fix] * len(todo), chunksize=chunk
            )
            fresh = list(results)
    else:
        fresh = [_review_one(path, settings, fix) for path in todo]
    for report in fresh:
        reports[report.path] = report
        if cache is not None:
            cache.put(Path(report.path), report)
    return ReviewReport([reports[str(path)] for path in files])


def review_source(
    source: str, path: str = "<string>", settings: ReviewSettings | None = None
) -> list[Finding]:
    """Review one piece of source text (the library entry point for tools and tests)."""
    settings = settings or ReviewSettings()
    return analyse_source(source, path, settings.enabled_for(path), settings)


def _review_one(path: str, settings: ReviewSettings, fix: FixMode | None) -> FileReport:
    try:
        source_file = read_source(Path(path))
    except ValueError as exc:
        return FileReport(path, [_unreadable(path, str(exc))])
    enabled = settings.enabled_for(path)
    findings = analyse_source(source_file.source, path, enabled, settings)
    lines = source_file.source.count("\n")
    if source_file.is_notebook:
        return FileReport(path, _map_cells(findings, source_file), lines)
    report = FileReport(path, findings, lines)
    if fix is None or not any(f.fix for f in findings) or any(f.code == "TW000" for f in findings):
        return report  # nothing to fix, or a file we never touch (it does not parse)

    def analyse(text: str) -> list[Finding]:
        return analyse_source(text, path, enabled, settings)

    fixed, count = fix_source(source_file.source, analyse, fix.minimum)
    if count and fixed != source_file.source:
        ast.parse(fixed)  # fix_source guarantees this; never write a broken file
        if fix.write:
            Path(path).write_text(fixed, encoding="utf-8")
        report = FileReport(
            path, analyse(fixed), fixed.count("\n"), count, source_file.source, fixed
        )
    return report


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


class _Cache:
    """Findings by (content hash, rules, settings): a changed file or rule set misses."""

    def __init__(self, directory: Path, settings: ReviewSettings) -> None:
        self.directory = directory / "review"
        self.settings = settings
        self.salt = hashlib.sha256(
            f"{__version__}|{_engine_fingerprint()}|{settings.min_torch_version}".encode()
        ).hexdigest()

    def _key(self, path: Path, data: bytes) -> Path:
        enabled = ",".join(sorted(self.settings.enabled_for(str(path))))
        digest = hashlib.sha256()
        for part in (self.salt.encode(), str(path).encode(), enabled.encode(), data):
            digest.update(part)
            digest.update(b"\0")
        name = digest.hexdigest()
        return self.directory / name[:2] / f"{name}.json"

    def get(self, path: Path) -> FileReport | None:
        try:
            entry = self._key(path, path.read_bytes())
            stored = json.loads(entry.read_text(encoding="utf-8"))
            findings = [finding_from_dict(item) for item in stored["findings"]]
            return FileReport(str(path), findings, int(stored["lines"]), cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, path: Path, report: FileReport) -> None:
        try:
            entry = self._key(path, path.read_bytes())
            entry.parent.mkdir(parents=True, exist_ok=True)
            payload = {
                "lines": report.lines,
                "findings": [finding_to_dict(f) for f in report.findings],
            }
            temporary = entry.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(payload), encoding="utf-8")
            temporary.replace(entry)
            ignore = self.directory.parent / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# created by torchwise\n*\n", encoding="utf-8")
        except OSError:
            pass  # a read-only tree still gets reviewed, just not cached


@functools.cache
def _engine_fingerprint() -> str:
    """A hash of the review package's own sources, so editing a rule invalidates the cache."""
    digest = hashlib.sha256()
    package = Path(__file__).parent
    for file in sorted(package.rglob("*.py")):
        stat = file.stat()
        digest.update(f"{file.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()
