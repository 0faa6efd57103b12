"""Recall of ``torchwise review`` on real bugs recorded by an independent reviewer.

``bench/labels/recall.csv`` lists every bug a senior reviewer found reading 47
real training and evaluation scripts from 20 public repositories, without
running torchwise or reading its rules (see ``bench/labels/recall_README.md``).
This script reviews the files that were read (each script and the project files
a recorded bug lives in), at the recorded commits, and counts a bug as found
when a finding of a rule that addresses its category is reported within
``NEAR`` lines of the recorded line (anywhere in the file for the categories
whose line is nominal, such as ``never-seeded``).

Sources: the ``fetch`` snapshots under /work/.mirror; for the two repositories
too large to fetch (pytorch/tutorials, huggingface/transformers), the read file
saved under ``bench/.corpus/recall_files/<owner>+<name>/<path>`` from the
stored-file index at the recorded commit. Nothing is committed.

Usage: ``python bench/review_recall.py [--misses] [--by-category]``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from review_corpus import CORPUS, MIRROR, Repository, extract
from torchwise.review import ReviewSettings, review_paths

LABELS = Path(__file__).parent / "labels"
RECALL_REPOS = CORPUS / "recall"
SAVED_FILES = CORPUS / "recall_files"
NEAR = 3  # lines either side of the recorded line

#: category -> the rule codes that address it. A category missing here has no
#: rule (yet); its bugs count as missed.
RULES_FOR: dict[str, tuple[str, ...]] = {
    "never-seeded": ("TW604",),
    "partially-seeded": ("TW604",),
    "torch-load-weights-only-crash": ("TW416",),
    "removed-api": ("TW418", "TW402"),
    "legacy-loss-data-index": ("TW130",),
    "batchnorm-eps-as-momentum": ("TW139",),
    "gan-d-step-through-generator": ("TW117",),
    "eval-without-no-grad": ("TW114",),
    "sampling-without-no-grad": ("TW114",),
    "legacy-volatile-variable": ("TW419",),
    "grad-accumulation-off-by-one": ("TW119",),
    "optimizer-before-model-replaced": ("TW118",),
    "eval-without-eval-mode": ("TW104", "TW105"),
    "clip-scaled-amp-grads": ("TW109",),
    "unshuffled-train-loader": ("TW115",),
    "frozen-module-in-train-mode": ("TW116",),
    "softmax-before-crossentropy": ("TW127",),
    "argparse-bool-flag": ("TW605",),
    "syntax-error": ("TW000",),
    "debug-break-left-in-loop": ("TW123",),
    "val-loader-drop-last": ("TW141",),
    "optimizer-recreated-each-epoch": ("TW142",),
    "metric-averaged-wrongly": ("TW143",),
    "resume-incomplete-state": ("TW603",),
    "split-leakage": ("TW606",),
    "lr-schedule-misconfigured": ("TW144",),
    "hyperparameter-ignored": ("TW145",),
    "model-selection-on-test-set": ("TW607",),
}
#: Categories whose recorded line is nominal: any finding in the file counts.
PER_FILE = {"never-seeded", "partially-seeded"}


def _repository(name: str, commit: str) -> Path:
    key = name.replace("/", "+")
    if (MIRROR / key / "repo").exists():
        return extract(Repository(name, commit, "recall"), into=RECALL_REPOS)
    saved = SAVED_FILES / key
    if saved.is_dir():
        return saved
    raise SystemExit(f"{name}: no snapshot under {MIRROR} and no saved files under {saved}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="list the bugs not found")
    parser.add_argument("--by-category", action="store_true", help="recall per category")
    args = parser.parse_args()

    rows = list(csv.DictReader((LABELS / "recall.csv").open()))
    scripts = list(csv.DictReader((LABELS / "recall_scripts.csv").open()))
    wanted: dict[tuple[str, str], set[str]] = defaultdict(set)
    for item in [*rows, *scripts]:
        wanted[(item["repo"], item["commit"])].add(item["path"])

    findings: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    for (repo, commit), paths in sorted(wanted.items()):
        root = _repository(repo, commit)
        files = [root / path for path in sorted(paths) if (root / path).is_file()]
        report = review_paths(files, ReviewSettings(), jobs=1)
        for finding in report.findings:
            relative = Path(finding.path).relative_to(root).as_posix()
            findings[(repo, relative)].append((finding.code, finding.line))

    found = Counter()
    total = Counter()
    missed = []
    for row in rows:
        category = row["category"]
        codes = RULES_FOR.get(category, ())
        line = int(row["line"])
        hits = [
            (code, at)
            for code, at in findings[(row["repo"], row["path"])]
            if code in codes and (category in PER_FILE or abs(at - line) <= NEAR)
        ]
        total[category] += 1
        if hits:
            found[category] += 1
        else:
            missed.append(row)
    hit, count = sum(found.values()), len(rows)
    print(f"recall: {hit} of {count} recorded bugs found ({100 * hit / count:.0f}%)")
    # The most common category is also the easiest to find: quote recall without it too.
    seeded_hit = sum(n for c, n in found.items() if c in PER_FILE)
    seeded_count = sum(n for c, n in total.items() if c in PER_FILE)
    rest_hit, rest_count = hit - seeded_hit, count - seeded_count
    print(
        f"without the seeding rows ({seeded_count}): {rest_hit} of {rest_count} "
        f"({100 * rest_hit / rest_count:.0f}%)"
    )
    by_impact_total = Counter(row["impact"] for row in rows)
    by_impact_missed = Counter(row["impact"] for row in missed)
    for impact, n in sorted(by_impact_total.items()):
        print(f"  {impact}: {n - by_impact_missed[impact]} of {n}")
    if args.by_category:
        print()
        print("| category | rules | found | recorded |")
        print("|---|---|---:|---:|")
        for category, n in sorted(total.items(), key=lambda item: (-item[1], item[0])):
            codes = ", ".join(RULES_FOR.get(category, ())) or "-"
            print(f"| {category} | {codes} | {found[category]} | {n} |")
    if args.misses:
        print()
        for row in missed:
            print(
                f"MISS {row['repo']} {row['path']}:{row['line']} [{row['category']}] "
                f"{row['description'][:110]}"
            )


if __name__ == "__main__":
    main()
