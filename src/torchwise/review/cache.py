"""The review cache in ``.torchwise_cache/review/``: two layers.

- **File entries**, one per file content (its path and bytes, hashed): the
  file's summary for the project index, and its findings keyed by the digest
  of the file's view of that index. A changed file is summarised again, and
  the rules re-run only where the index says the change can matter.
- **Run records**, one per run (the same files, the same settings): every
  file's findings, with the ``stat`` of everything the run looked at (the
  files it reviewed and the project files it indexed, the directories where it
  resolved imports and looked for packaging files, those packaging files). A
  run that finds every one of them unchanged is answered from its record
  without reading a source file or decoding a summary: an unchanged project
  costs a few hundred ``stat`` calls.

Both are keyed by the torchwise version and a hash of the review package's
own sources, so an upgrade or an edited rule starts afresh. A record never
vouches for a file modified within :data:`_RACY_NS` of the run that wrote it:
file times tick coarsely, and a second same-size edit within one tick would
look unchanged (git's "racy clean" problem); such a run writes no record.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchwise import __version__
from torchwise.findings import Finding, finding_from_dict, finding_to_dict
from torchwise.review.index.records import ModuleSummary
from torchwise.review.settings import ReviewSettings

#: A record is trusted only for files last changed this long before its run.
_RACY_NS = 2_000_000_000
#: Run records kept (one per set of files and settings); the oldest go first.
_MAX_RUNS = 16

#: ``(size, mtime_ns, ctime_ns, inode)`` of a path, or None where there is none.
Signature = tuple[int, int, int, int] | None


#: What the rule pass left of one file: its findings, and its praise (signal key -> lines).
Result = tuple[list[Finding], dict[str, list[int]]]


@dataclass
class Entry:
    summary: ModuleSummary
    lines: int
    results: dict[str, Result]  # view digest -> what the rules found with that view


@dataclass
class CachedReport:
    """One file's result as a run record holds it."""

    path: str
    findings: list[Finding]
    praise: dict[str, list[int]]
    lines: int


class ReviewCache:
    """The file entries and run records of one cache directory."""

    _MAX_VIEWS = 4  # findings kept per file entry (rule sets or project states)

    def __init__(self, directory: Path, settings: ReviewSettings) -> None:
        self.directory = directory / "review"
        self.settings = settings
        self.salt = hashlib.sha256(f"{__version__}|{_engine_fingerprint()}".encode()).hexdigest()

    # -- file entries -------------------------------------------------------------
    def _key(self, path: Path, data: bytes) -> Path:
        digest = hashlib.sha256()
        for part in (self.salt.encode(), str(path).encode(), data):
            digest.update(part)
            digest.update(b"\0")
        name = digest.hexdigest()
        return self.directory / name[:2] / f"{name}.json"

    def get(self, path: Path) -> Entry | None:
        try:
            stored = json.loads(self._key(path, path.read_bytes()).read_text(encoding="utf-8"))
            return Entry(
                ModuleSummary.from_json(stored["summary"]),
                int(stored["lines"]),
                {key: _result(item) for key, item in stored["results"].items()},
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(
        self, path: Path, summary: ModuleSummary, digest: str, lines: int, result: Result
    ) -> None:
        try:
            entry = self._key(path, path.read_bytes())
            try:
                stored = json.loads(entry.read_text(encoding="utf-8"))
                results = dict(list(stored["results"].items())[-(self._MAX_VIEWS - 1) :])
            except (OSError, ValueError, KeyError, TypeError):
                results = {}
            results[digest] = _stored(result)
            payload = {"summary": summary.to_json(), "lines": lines, "results": results}
            self._write(entry, payload)
        except OSError:
            pass  # a read-only tree still gets reviewed, just not cached

    # -- run records --------------------------------------------------------------
    def _run_key(self, paths: Sequence[str]) -> Path:
        settings = self.settings
        described = json.dumps(
            [
                self.salt,
                sorted(settings.enabled),
                settings.per_file_ignores,
                settings.exclude,
                settings.min_torch_version,
                str(settings.root),
                list(paths),
            ]
        )
        return self.directory / "runs" / f"{hashlib.sha256(described.encode()).hexdigest()}.json"

    def answered_run(self, paths: Sequence[str]) -> list[CachedReport] | None:
        """The reports of an earlier run of ``paths`` if nothing it looked at changed."""
        try:
            stored = json.loads(self._run_key(paths).read_text(encoding="utf-8"))
            looked_at: dict[str, list[int] | None] = stored["looked_at"]
            for path, signature in looked_at.items():
                now = _signature(path)
                if (None if now is None else list(now)) != signature:
                    return None
            return [
                CachedReport(path, *_result(report), report["lines"])
                for path, report in zip(paths, stored["reports"], strict=True)
            ]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def record_run(
        self,
        paths: Sequence[str],
        reports: Iterable[tuple[Result, int]],
        looked_at: Iterable[str],
        started_ns: int,
    ) -> None:
        """Keep a run's reports with the signatures of everything it looked at
        (unless one changed too close to the run to be told apart from a later edit)."""
        signatures = {path: _signature(path) for path in sorted(set(looked_at))}
        newest = started_ns - _RACY_NS
        # mtime, not ctime: a content edit sets both, and a file unpacked with its
        # original date (tar, git checkout of an old tree) is not an edit in flight.
        if any(s is not None and s[1] >= newest for s in signatures.values()):
            return
        payload = {
            "looked_at": {path: None if s is None else list(s) for path, s in signatures.items()},
            "reports": [{"lines": lines, **_stored(result)} for result, lines in reports],
        }
        target = self._run_key(paths)
        try:
            self._write(target, payload)
            records = sorted(target.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
            for old in records[:-_MAX_RUNS]:
                old.unlink(missing_ok=True)
        except OSError:
            pass

    def _write(self, target: Path, payload: object) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(payload), encoding="utf-8")
        temporary.replace(target)
        ignore = self.directory.parent / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# created by torchwise\n*\n", encoding="utf-8")


def _stored(result: Result) -> dict[str, object]:
    findings, praise = result
    return {"findings": [finding_to_dict(f) for f in findings], "praise": praise}


def _result(stored: dict[str, object]) -> Result:
    findings = stored["findings"]
    praise = stored["praise"]
    if not isinstance(findings, list) or not isinstance(praise, dict):
        raise TypeError("not a stored result")
    return [finding_from_dict(item) for item in findings], {
        str(key): [int(line) for line in lines] for key, lines in praise.items()
    }


def _signature(path: str) -> Signature:
    try:
        stat = os.stat(path or ".")
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


@functools.cache
def _engine_fingerprint() -> str:
    """A hash of the review package's own sources and data (the contract
    tables), so editing a rule or regenerating a table invalidates the cache."""
    digest = hashlib.sha256()
    package = Path(__file__).parent
    for file in sorted([*package.rglob("*.py"), *package.rglob("*.sqlite")]):
        stat = file.stat()
        digest.update(f"{file.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()
