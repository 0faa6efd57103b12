"""``torchwise review`` at first look on a fresh, hand-labelled corpus (issue 36).

A corpus lives in a directory ``ROOT`` (never committed: it holds third-party
code) with ``src/<owner>+<name>/`` (each repository's tree at the labelled
commit) and ``labels/``: ``recall*.csv`` (``repo,commit,path,line,category,
impact,semantic,description``, one row per bug, labelled by reading, without
torchwise), ``scripts*.csv`` (the entry scripts read) and ``clean*.csv``
(correct look-alikes). See ``bench/labels/v4_README.md``.

Each repository is reviewed whole, as a user would review the project, with
the default rules; the findings in the files read are kept. Two judgements
are made by a reader who did not write the rules, and stored beside the labels
so that a later run reuses them:

- ``judged_matches.csv``: for each bug, whether a finding within ``NEAR``
  lines (or naming a line there as its evidence) reports that bug. A finding
  near a bug that reports something else does not find it.
- ``judged_findings.csv``: for each error and warning, whether it is true
  (strictly: a likely bug a reviewer would ask to fix), for precision.

Pairs and findings not judged yet are written to ``pending_matches.csv`` and
``pending_findings.csv``; the figures are printed once none is pending
(``--partial`` prints them anyway, counting pending ones as not found / not
true).

Usage: ``python bench/review_fresh.py ROOT [--partial] [--misses]``; set
``PYTHONPATH`` to another checkout's ``src`` to measure that code (the
first-look figure is measured at the commit before any change).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torchwise.review import ReviewSettings, review_paths
from torchwise.review.registry import all_rules

NEAR = 3


@dataclass(frozen=True)
class Found:
    repo: str
    path: str
    line: int
    code: str
    severity: str
    message: str
    related: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"{self.repo}|{self.path}|{self.line}|{self.code}|{_digest(self.message)}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def bug_key(row: dict[str, str]) -> str:
    return f"{row['repo']}|{row['path']}|{row['line']}|{_digest(row['description'])}"


def read_rows(labels: Path, pattern: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for path in sorted(labels.glob(pattern)):
        with path.open(newline="") as handle:
            rows.extend(csv.DictReader(handle))
    return rows


def review_corpus(root: Path, files: dict[str, set[str]]) -> list[Found]:
    found = []
    for repo in sorted(files):
        tree = root / "src" / repo.replace("/", "+")
        report = review_paths([tree], ReviewSettings(), jobs=1)
        for finding in report.findings:
            relative = Path(finding.path).resolve().relative_to(tree.resolve()).as_posix()
            if relative not in files[repo]:
                continue
            related = tuple(
                int(value)
                for key, value in finding.data.items()
                if key.endswith("line") and str(value).isdigit()
            )
            found.append(
                Found(
                    repo,
                    relative,
                    finding.line,
                    finding.code,
                    finding.severity.value,
                    finding.message,
                    related,
                )
            )
    return found


def near(bug: dict[str, str], finding: Found) -> bool:
    if (bug["repo"], bug["path"]) != (finding.repo, finding.path):
        return False
    line = int(bug["line"])
    return any(abs(at - line) <= NEAR for at in (finding.line, *finding.related))


def load_judged(path: Path, key: str) -> dict[str, str]:
    if not path.exists():
        return {}
    with path.open(newline="") as handle:
        return {row[key]: row["verdict"] for row in csv.DictReader(handle)}


def write_rows(path: Path, fields: list[str], rows: Iterable[dict[str, object]]) -> int:
    rows = list(rows)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fields)
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument(
        "--partial", action="store_true", help="print figures with judgements pending"
    )
    parser.add_argument("--misses", action="store_true", help="list the bugs not found")
    parser.add_argument(
        "--false", action="store_true", help="list the errors and warnings judged false"
    )
    parser.add_argument(
        "--torchfix", action="store_true", help="TorchFix's recall on the same files"
    )
    parser.add_argument(
        "--without",
        metavar="PREFIX",
        help="leave out the bug rows whose category starts with PREFIX (deprecations that work)",
    )
    options = parser.parse_args()
    labels = options.root / "labels"
    every_bug = read_rows(labels, "recall*.csv")
    scripts = read_rows(labels, "scripts*.csv")
    clean = read_rows(labels, "clean*.csv")
    files: dict[str, set[str]] = defaultdict(set)
    for row in [*every_bug, *scripts, *clean]:
        files[row["repo"]].add(row["path"])
    bugs = [
        bug
        for bug in every_bug
        if not (options.without and bug["category"].startswith(options.without))
    ]
    found = review_corpus(options.root, files)

    matches = load_judged(labels / "judged_matches.csv", "pair")
    verdicts = load_judged(labels / "judged_findings.csv", "finding")
    pending_pairs = []
    found_by: dict[str, list[Found]] = defaultdict(list)
    for bug in bugs:
        for finding in found:
            if not near(bug, finding):
                continue
            pair = f"{bug_key(bug)}#{finding.key}"
            verdict = matches.get(pair)
            if verdict is None:
                pending_pairs.append(
                    {
                        "pair": pair,
                        "repo": bug["repo"],
                        "path": bug["path"],
                        "bug_line": bug["line"],
                        "bug": bug["description"],
                        "finding_line": finding.line,
                        "code": finding.code,
                        "severity": finding.severity,
                        "message": finding.message,
                    }
                )
            elif verdict == "yes":
                found_by[bug_key(bug)].append(finding)
    strict = [item for item in found if item.severity in ("error", "warning")]
    pending_findings = [
        {
            "finding": item.key,
            "repo": item.repo,
            "path": item.path,
            "line": item.line,
            "code": item.code,
            "severity": item.severity,
            "message": item.message,
        }
        for item in strict
        if item.key not in verdicts
    ]
    pair_fields = [
        "pair",
        "repo",
        "path",
        "bug_line",
        "bug",
        "finding_line",
        "code",
        "severity",
        "message",
    ]
    finding_fields = ["finding", "repo", "path", "line", "code", "severity", "message"]
    write_rows(labels / "pending_matches.csv", pair_fields, pending_pairs)
    write_rows(labels / "pending_findings.csv", finding_fields, pending_findings)
    print(f"{len(found)} findings ({len(strict)} errors and warnings) on {len(files)} repositories")
    if (pending_pairs or pending_findings) and not options.partial:
        print(
            f"judgements pending: {len(pending_pairs)} bug/finding pairs, "
            f"{len(pending_findings)} findings (see {labels}/pending_*.csv)"
        )
        return 1
    report(bugs, found_by, strict, verdicts, clean, found, options.misses)
    if options.false:
        for item in strict:
            if verdicts.get(item.key) == "false":
                where = f"{item.repo} {item.path}:{item.line}"
                print(f"  FALSE {item.code} {item.severity} {where} {item.message[:100]}")
    if options.torchfix:
        torchfix_recall(options.root, bugs)
    return 0


def _share(part: int, whole: int) -> str:
    return f"{part} / {whole} ({100 * part / whole:.0f}%)" if whole else "0 / 0"


def report(
    bugs: list[dict[str, str]],
    found_by: dict[str, list[Found]],
    strict: list[Found],
    verdicts: dict[str, str],
    clean: list[dict[str, str]],
    found: list[Found],
    misses: bool,
) -> None:
    def caught(bug: dict[str, str], severities: tuple[str, ...]) -> bool:
        return any(item.severity in severities for item in found_by.get(bug_key(bug), []))

    strict_levels = ("error", "warning")
    every_level = ("error", "warning", "info")
    semantic = [bug for bug in bugs if bug["semantic"].strip().lower() == "yes"]
    serious = [bug for bug in bugs if bug["impact"] in ("crash", "results")]
    repositories = len({bug["repo"] for bug in bugs})
    print(f"bugs: {len(bugs)} ({len(semantic)} semantic) in {repositories} repositories")
    print(
        "recall at warning or error:",
        _share(sum(caught(b, strict_levels) for b in bugs), len(bugs)),
    )
    print(
        "recall, any severity:      ", _share(sum(caught(b, every_level) for b in bugs), len(bugs))
    )
    print(
        "semantic, warning or error:",
        _share(sum(caught(b, strict_levels) for b in semantic), len(semantic)),
    )
    print(
        "crash or results, w/e:     ",
        _share(sum(caught(b, strict_levels) for b in serious), len(serious)),
    )
    families = {code: info.cls.family for code, info in all_rules().items()}
    for severity in strict_levels:
        judged = [item for item in strict if item.severity == severity]
        true = sum(verdicts.get(item.key) == "true" for item in judged)
        print(f"{severity} precision:           ", _share(true, len(judged)))
        # The security rules warn by policy (a path from outside the project is
        # a risk whether or not this project's file is benign): shown apart.
        for label, wanted in (("security rules", True), ("other rules", False)):
            part = [item for item in judged if (families.get(item.code) == "security") == wanted]
            true = sum(verdicts.get(item.key) == "true" for item in part)
            print(f"  {label + ':':<23}", _share(true, len(part)))
    flagged = 0
    for row in clean:
        line = int(row["line"])
        flagged += any(
            item.repo == row["repo"]
            and item.path == row["path"]
            and item.severity in strict_levels
            and abs(item.line - line) <= NEAR
            and verdicts.get(item.key) != "true"
            for item in found
        )
    print("clean look-alikes flagged (false, within 3 lines):", _share(flagged, len(clean)))
    if misses:
        for bug in bugs:
            if not caught(bug, strict_levels):
                where = f"{bug['repo']} {bug['path']}:{bug['line']}"
                print(f"  MISS {where} [{bug['category']}] {bug['description'][:110]}")


def torchfix_recall(root: Path, bugs: list[dict[str, str]]) -> None:
    """Bugs with any TorchFix finding within NEAR lines (TorchFix's own, unjudged)."""
    hits = 0
    by_file: dict[tuple[str, str], list[int]] = {}
    for repo, path in {(bug["repo"], bug["path"]) for bug in bugs}:
        target = root / "src" / repo.replace("/", "+") / path
        result = subprocess.run(
            [sys.executable, "-m", "torchfix", "--select", "ALL", str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = []
        for text in result.stdout.splitlines():
            parts = text.split(":")
            if len(parts) > 2 and parts[1].isdigit():
                lines.append(int(parts[1]))
        by_file[(repo, path)] = lines
    for bug in bugs:
        line = int(bug["line"])
        hits += any(abs(at - line) <= NEAR for at in by_file[(bug["repo"], bug["path"])])
    print("TorchFix (any finding within 3 lines):", _share(hits, len(bugs)))


if __name__ == "__main__":
    raise SystemExit(main())
