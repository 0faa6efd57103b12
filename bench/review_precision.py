"""Findings of ``torchwise review`` on real PyTorch libraries, for the precision study.

Reviews the sources of timm, lightning, torchmetrics and transformers (wheels
from PyPI, see ``_corpus.py``) with the default rules and prints files, lines
and findings per rule per library, plus any TW000 (a crash would show up as
an internal error and a non-zero exit here). Every finding is written to
``bench/.out/precision/<library>.json`` so that warnings and errors can be
sampled and read against the code; the verdicts are in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _corpus import LIBRARIES, corpus, version
from torchwise.review import ReviewSettings, get_rule, review_paths
from torchwise.review.output.json import finding_json

OUT = Path(__file__).parent / ".out" / "precision"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    names = sys.argv[1:] or list(LIBRARIES)
    counts: dict[str, Counter[str]] = {}
    print("| library | files | lines | findings | TW000 |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        report = review_paths([corpus(name)], ReviewSettings(), jobs=None)
        findings = report.findings
        counts[name] = Counter(finding.code for finding in findings)
        (OUT / f"{name}.json").write_text(
            json.dumps([finding_json(finding) for finding in findings], indent=1)
        )
        label = f"{name} {version(name)}"
        print(
            f"| {label} | {len(report.files)} | {report.lines:,} | {len(findings)} "
            f"| {counts[name]['TW000']} |"
        )
    codes = sorted(set().union(*counts.values()))
    print()
    print("| code | rule | severity | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---:|" * len(names))
    for code in codes:
        info = get_rule(code)
        row = " | ".join(str(counts[name][code]) for name in names)
        name = info.name if info else ""
        severity = info.severity.value if info else ""
        print(f"| {code} | {name} | {severity} | {row} |")


if __name__ == "__main__":
    main()
