"""Precision of ``torchwise review`` on real code no one here wrote.

Reviews every entry of the corpus (``review_corpus.py``: PyPI package sources
and pinned public repositories) with the default rules and matches each
warning and error against ``bench/labels/precision.csv``, where every one was
read at its line and labelled by hand::

    corpus,version,path,line,code,verdict,reason

``verdict`` is ``true`` (a real problem a reviewer would ask to fix) or
``false`` (a false alarm), with a one-line reason. Prints, per rule, the
findings, the labelled true/false counts and the precision, against the
severity contract (error >= 95%, warning >= 85%).

Usage::

    python bench/review_precision.py                 # the table
    python bench/review_precision.py --unlabelled    # findings still to label, with code
    python bench/review_precision.py --only timm     # one corpus entry (name substring)
    python bench/review_precision.py --reuse         # the table from the saved findings
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from review_corpus import entries
from torchwise.review import ReviewSettings, Severity, get_rule, review_paths

LABELS = Path(__file__).parent / "labels" / "precision.csv"
OUT = Path(__file__).parent / ".out" / "precision"
TARGET = {"error": 0.95, "warning": 0.85}
FIELDS = ["corpus", "version", "path", "line", "code", "verdict", "reason"]

Key = tuple[str, str, int, str]  # (corpus, path, line, code)


def read_labels() -> dict[Key, dict[str, str]]:
    if not LABELS.exists():
        return {}
    with LABELS.open(newline="") as handle:
        return {
            (row["corpus"], row["path"], int(row["line"]), row["code"]): row
            for row in csv.DictReader(handle)
        }


def review_corpus(
    only: list[str] | None, reuse: bool = False
) -> list[tuple[str, str, str, int, str, str, str]]:
    """(corpus, version, path, line, code, severity, message) of every warning and error."""
    found = []
    OUT.mkdir(parents=True, exist_ok=True)
    for entry in entries(only):
        saved = OUT / f"{entry.name.replace('/', '+')}.json"
        if reuse and saved.exists():  # the findings of an earlier run of this same code
            found += [tuple(row) for row in json.loads(saved.read_text())]
            continue
        report = review_paths([entry.root], ReviewSettings())
        rows = []
        for finding in report.findings:
            if finding.severity is Severity.INFO:
                continue
            relative = Path(finding.path).resolve().relative_to(entry.root.resolve()).as_posix()
            row = (
                entry.name,
                entry.version,
                relative,
                finding.line,
                finding.code,
                finding.severity.value,
                finding.message,
            )
            rows.append(row)
        (OUT / f"{entry.name.replace('/', '+')}.json").write_text(json.dumps(rows, indent=1))
        print(
            f"{entry.name} {entry.version[:12]}: {len(report.files)} files, "
            f"{report.lines:,} lines, {len(rows)} warnings and errors",
            file=sys.stderr,
        )
        found += rows
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="corpus entries whose name contains these")
    parser.add_argument("--unlabelled", action="store_true", help="print findings to label")
    parser.add_argument("--context", type=int, default=2, help="lines of code around each")
    parser.add_argument(
        "--reuse", action="store_true", help="reuse the findings saved by an earlier run"
    )
    args = parser.parse_args()

    labels = read_labels()
    findings = review_corpus(args.only, args.reuse)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    unlabelled = []
    for corpus, _version, path, line, code, _severity, message in findings:
        row = labels.get((corpus, path, line, code))
        verdict = row["verdict"] if row else "unlabelled"
        counts[code][verdict] += 1
        if row is None:
            unlabelled.append((corpus, path, line, code, message))

    print("| code | rule | severity | findings | true | false | precision | contract |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    total: Counter[str] = Counter()
    for code in sorted(counts):
        info = get_rule(code)
        severity = info.severity.value if info else "?"
        count = counts[code]
        judged = count["true"] + count["false"]
        precision = count["true"] / judged if judged else None
        contract = TARGET.get(severity)
        meets = (
            "-"
            if precision is None or contract is None
            else ("meets" if precision >= contract else "MISSES")
        )
        shown = "-" if precision is None else f"{100 * precision:.0f}%"
        name = info.name if info else ""
        print(
            f"| {code} | {name} | {severity} | {sum(count.values())} | {count['true']} "
            f"| {count['false']} | {shown} | {meets} |"
        )
        total.update(count)
    print()
    print(
        f"{sum(total.values())} warnings and errors: {total['true']} true, {total['false']} false, "
        f"{total['unlabelled']} not labelled yet"
    )
    stale = set(labels) - {(c, p, ln, code) for c, _, p, ln, code, _, _ in findings}
    if stale and not args.only:
        print(f"{len(stale)} labels match no finding any more (fixed false positives, or moved)")
    if args.unlabelled:
        _print_unlabelled(unlabelled, args.context)


def _print_unlabelled(rows: list[tuple[str, str, int, str, str]], context: int) -> None:
    roots = {entry.name: entry.root for entry in entries()}
    for corpus, path, line, code, message in rows:
        print(f"\n=== {corpus} {path}:{line} {code} {message}")
        try:
            lines = (roots[corpus] / path).read_text(errors="replace").splitlines()
        except (OSError, KeyError):
            continue
        for number in range(max(1, line - context), min(len(lines), line + context) + 1):
            marker = ">" if number == line else " "
            print(f"{marker}{number:5d} {lines[number - 1][:140]}")


if __name__ == "__main__":
    main()
