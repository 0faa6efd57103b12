"""Recall and false alarms of ``torchwise review`` on the v3 corpus (issue 21).

``bench/labels/v3_recall.csv`` lists the bugs a senior reviewer found reading
60 scripts from 26 public repositories no one here had used, without running
torchwise or reading its rules (``bench/labels/v3_README.md``);
``v3_clean.csv`` lists 101 places in the same files that look like one of the
bug classes but are correct. This script reviews every file read (each
script and the project files a recorded bug or look-alike lives in) at the
recorded commits and reports:

- recall: a bug is found when a finding of a rule that addresses its category
  is reported within ``NEAR`` lines of the recorded line, or names a line
  there as its evidence (TW704 names the line that made the vector); anywhere
  in the file for the categories whose line is nominal (``never-seeded``), in
  the same function for those about a whole function (an evaluation pass with
  autograd on); over all bugs, the result-changing and crashing ones, and the
  semantic ones;
- false alarms on the look-alikes: an error or warning within ``NEAR`` lines
  of a correct place of its pattern;
- every other error or warning: judged in ``v3_judged.csv`` (by a reader who
  did not write the rule, after the finding was made), or listed to be judged
  (``--unjudged``); with TorchFix's findings on the same files beside them
  (``--torchfix``).

The corpus is split at random by repository (the SHA-256 of its name): the
rules were developed looking at the ``dev`` half only; ``held`` is the honest
measure. ``--half dev|held|all`` chooses.

Sources: the ``fetch`` snapshots under /work/.mirror (unpacked under
``bench/.corpus/v3/``, never committed).

Usage: ``python bench/review_v3.py [--half all] [--by-category] [--misses]
[--unjudged] [--torchfix]``.
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from review_corpus import CORPUS, Repository, extract
from torchwise.review import ReviewSettings, Severity, review_paths

LABELS = Path(__file__).parent / "labels"
V3_REPOS = CORPUS / "v3"
NEAR = 3  # lines either side of the recorded line

#: category -> the rule codes that address it. A category missing here has no
#: rule; its bugs count as missed.
RULES_FOR: dict[str, tuple[str, ...]] = {
    # not semantic
    "never-seeded": ("TW604",),
    "legacy-loss-data-index": ("TW130",),
    "removed-api": ("TW418", "TW402", "TW420"),
    "weights-only-payload": ("TW416", "TW609"),
    "eval-without-no-grad": ("TW114",),
    "sampling-without-no-grad": ("TW114",),
    "argparse-bool-flag": ("TW605",),
    "syntax-error": ("TW000",),
    "hyperparameter-ignored": ("TW145",),
    "scheduler-before-optimizer": ("TW103",),
    "resume-incomplete-state": ("TW603",),
    "default-tensor-type-cuda": ("TW712",),
    "argparse-flag-always-true": ("TW611",),
    "argparse-wrong-type": ("TW613",),
    "ecosystem-api-change": ("TW307", "TW418"),
    "undefined-name": ("TW001",),
    "string-concat-typo": ("TW002",),
    "wrong-condition": ("TW614",),
    "wrong-api-call": ("TW418",),
    "model-selection-on-test-set": ("TW615",),
    "argparse-missing-type": ("TW613",),
    "launcher-local-rank-arg": ("TW612",),
    "gym-api-mismatch": ("TW148",),
    # semantic
    "log-of-softmax": ("TW501",),
    "log-of-sigmoid": ("TW507",),
    "tensor-created-without-device": ("TW206", "TW140", "TW701", "TW418"),
    "determinism-undone": ("TW608",),
    "unguarded-cuda": ("TW708", "TW204"),
    "eval-mode": ("TW104", "TW105", "TW116", "TW149"),
    "detach-missing": ("TW117",),
    "gradient-cut": ("TW125",),
    "loss-target-grad": ("TW707", "TW419"),
    "seed-not-reaching-workers": ("TW607",),
    "shape-broadcast": ("TW704",),
    "shape-mismatch": ("TW704", "TW706", "TW709", "TW710", "TW711", "TW130", "TW713"),
    "reduced-index": ("TW706",),
    "grad-accumulation": ("TW101", "TW102", "TW119"),
    "graph-kept-alive": ("TW106",),
    "seeded-too-late": ("TW604",),
    "data-iterator-exhausted": ("TW147",),
    "rl-truncation-ignored": ("TW148",),
    "device-mismatch": ("TW701",),
    "alias-inplace": ("TW705",),
    "branch-only-setting": ("TW146",),
}
#: Categories whose recorded line is nominal: any finding in the file counts.
PER_FILE = {"never-seeded"}
#: Categories about a whole function (an evaluation pass with autograd on): a
#: finding anywhere in the function that holds the recorded line counts (the
#: rule reports the loop that runs the model, the label may name the call).
PER_FUNCTION = {"eval-without-no-grad", "sampling-without-no-grad"}


def half_of(repo: str) -> str:
    """The half a repository belongs to, fixed by its name."""
    return "dev" if int(hashlib.sha256(repo.encode()).hexdigest(), 16) % 2 == 0 else "held"


def _read(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader((LABELS / name).open()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=("dev", "held", "all"), default="dev")
    parser.add_argument("--by-category", action="store_true")
    parser.add_argument("--misses", action="store_true", help="list the bugs not found")
    parser.add_argument("--unjudged", action="store_true", help="list findings matching no label")
    parser.add_argument("--torchfix", action="store_true", help="run TorchFix on the same files")
    args = parser.parse_args()

    def wanted(row: dict[str, str]) -> bool:
        return args.half == "all" or half_of(row["repo"]) == args.half

    bugs = [row for row in _read("v3_recall.csv") if wanted(row)]
    clean = [row for row in _read("v3_clean.csv") if wanted(row)]
    scripts = [row for row in _read("v3_scripts.csv") if wanted(row)]
    files: dict[tuple[str, str], set[str]] = defaultdict(set)
    for item in [*bugs, *clean, *scripts]:
        files[(item["repo"], item["commit"])].add(item["path"])

    findings: dict[tuple[str, str], list[tuple[str, int, str, str]]] = defaultdict(list)
    roots: dict[str, Path] = {}
    for (repo, commit), paths in sorted(files.items()):
        root = extract(Repository(repo, commit, "v3"), into=V3_REPOS)
        roots[repo] = root
        # The whole repository, as a user reviews a project (a save in one
        # script and the load in another meet); findings kept for the files read.
        report = review_paths([root], ReviewSettings(), jobs=1)
        for finding in report.findings:
            relative = Path(finding.path).relative_to(root).as_posix()
            if relative not in paths:
                continue
            related = tuple(
                int(value)
                for key, value in finding.data.items()
                if key.endswith("line") and str(value).isdigit()
            )
            findings[(repo, relative)].append(
                (finding.code, finding.line, finding.severity.value, finding.message, related)
            )

    _recall(bugs, findings, args)
    _false_alarms(bugs, clean, findings, args)
    if args.torchfix:
        _torchfix(bugs, files, roots)


def _matches(row: dict[str, str], codes: tuple[str, ...], found: list) -> list:
    line = int(row["line"])
    per_file = row.get("category") in PER_FILE
    span = _function_span(row) if row.get("category") in PER_FUNCTION else None

    def near(at: int) -> bool:
        if per_file or abs(at - line) <= NEAR:
            return True
        return span is not None and span[0] <= at <= span[1]

    # A finding counts at its line, and at the lines its evidence names (the
    # line that made a vector a loss broadcasts: where the fix may belong).
    return [f for f in found if f[0] in codes and any(near(at) for at in (f[1], *f[4]))]


def _function_span(row: dict[str, str]) -> tuple[int, int] | None:
    """The lines of the innermost function that holds the recorded line."""
    path = V3_REPOS / row["repo"].replace("/", "+") / row["path"]
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    line = int(row["line"])
    spans = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    return max(spans, key=lambda span: span[0]) if spans else None


def _recall(bugs: list[dict[str, str]], findings: dict, args: argparse.Namespace) -> None:
    found, total = Counter(), Counter()
    missed = []
    for row in bugs:
        category = row["category"]
        hits = _matches(row, RULES_FOR.get(category, ()), findings[(row["repo"], row["path"])])
        total[category] += 1
        if hits:
            found[category] += 1
        else:
            missed.append(row)
    missed_ids = {id(row) for row in missed}
    serious = {Severity.ERROR.value, Severity.WARNING.value}
    flagged = {
        id(row)
        for row in bugs
        if _matches(
            row,
            RULES_FOR.get(row["category"], ()),
            [f for f in findings[(row["repo"], row["path"])] if f[2] in serious],
        )
    }

    def share(rows: list[dict[str, str]]) -> str:
        hit = sum(1 for row in rows if id(row) not in missed_ids)
        loud = sum(1 for row in rows if id(row) in flagged)
        shown = f"{hit} of {len(rows)} ({100 * hit / max(len(rows), 1):.0f}%)"
        return f"{shown}; as an error or warning {loud} ({100 * loud / max(len(rows), 1):.0f}%)"

    print(f"half: {args.half}")
    print(f"recall, all bugs: {share(bugs)}")
    harmful = [r for r in bugs if r["impact"] in ("results", "crash")]
    print(f"  result-changing or crashing: {share(harmful)}")
    print(f"  semantic: {share([r for r in bugs if r['semantic'] == 'yes'])}")
    print(f"  not semantic: {share([r for r in bugs if r['semantic'] != 'yes'])}")
    for impact in sorted({row["impact"] for row in bugs}):
        print(f"  {impact}: {share([r for r in bugs if r['impact'] == impact])}")
    if args.by_category:
        print("\n| category | semantic | rules | found | recorded |")
        print("|---|---|---|---:|---:|")
        semantic = {row["category"]: row["semantic"] for row in bugs}
        for category, n in sorted(total.items(), key=lambda item: (-item[1], item[0])):
            codes = ", ".join(RULES_FOR.get(category, ())) or "-"
            print(f"| {category} | {semantic[category]} | {codes} | {found[category]} | {n} |")
    if args.misses:
        print()
        for row in missed:
            print(
                f"MISS [{row['category']}] {row['repo']}/{row['path']}:{row['line']} "
                f"{row['description'][:150]}"
            )


def _false_alarms(
    bugs: list[dict[str, str]],
    clean: list[dict[str, str]],
    findings: dict,
    args: argparse.Namespace,
) -> None:
    """Errors and warnings: on a labelled bug (true), on a look-alike (false), or unjudged."""
    serious = {Severity.ERROR.value, Severity.WARNING.value}
    judged = {
        (row["repo"], row["path"], int(row["line"]), row["code"]): row["verdict"]
        for row in _read("v3_judged.csv")
    }
    verdicts: Counter[tuple[str, str]] = Counter()
    unjudged = []
    for (repo, path), items in sorted(findings.items()):
        for code, line, severity, message, related in items:
            if severity not in serious:
                continue
            near = [r for r in bugs if r["repo"] == repo and r["path"] == path]
            true = any(
                _matches(
                    r, RULES_FOR.get(r["category"], ()), [(code, line, severity, message, related)]
                )
                for r in near
            )
            false = any(
                r["repo"] == repo
                and r["path"] == path
                and abs(int(r["line"]) - line) <= NEAR
                and code in RULES_FOR.get(r["pattern"], ())
                for r in clean
            )
            verdict = "true" if true else "false" if false else "unjudged"
            if verdict == "unjudged":
                verdict = judged.get((repo, path, line, code), "unjudged")
            verdicts[(severity, verdict)] += 1
            if verdict == "unjudged":
                unjudged.append((repo, path, line, code, severity, message))
            elif verdict == "false":
                print(f"FALSE {repo}/{path}:{line} {code} {message[:150]}")
    print("\nerrors and warnings on these files:")
    for severity in ("error", "warning"):
        row = {v: verdicts[(severity, v)] for v in ("true", "false", "unjudged")}
        judged_count = row["true"] + row["false"]
        share = f"{100 * row['true'] / judged_count:.0f}% true" if judged_count else "none judged"
        print(f"  {severity}: {row} ({share})")
    clean_hits = sum(
        1
        for r in clean
        if any(
            abs(int(r["line"]) - f[1]) <= NEAR
            and f[2] in serious
            and f[0] in RULES_FOR.get(r["pattern"], ())
            for f in findings[(r["repo"], r["path"])]
        )
    )
    print(f"look-alikes flagged by a rule of their pattern: {clean_hits} of {len(clean)}")
    if args.unjudged:
        for repo, path, line, code, severity, message in unjudged:
            print(f"UNJUDGED {repo}/{path}:{line} {code} {severity} {message[:170]}")


def _torchfix(bugs: list[dict[str, str]], files: dict, roots: dict[str, Path]) -> None:
    """TorchFix (``pip install torchfix``) on the same files: its findings within
    ``NEAR`` lines of a recorded bug, whatever its code."""
    hit = 0
    total_findings = 0
    for (repo, _commit), paths in sorted(files.items()):
        root = roots[repo]
        for path in sorted(paths):
            target = root / path
            if not target.is_file() or target.suffix != ".py":
                continue
            done = subprocess.run(
                [sys.executable, "-m", "torchfix", "--select", "ALL", str(target)],
                capture_output=True,
                text=True,
                check=False,
            )
            lines = []
            for out_line in done.stdout.splitlines():
                parts = out_line.split(":")
                if len(parts) > 2 and parts[1].isdigit():
                    lines.append(int(parts[1]))
            total_findings += len(lines)
            for row in bugs:
                same_file = row["repo"] == repo and row["path"] == path
                if same_file and any(abs(int(row["line"]) - line) <= NEAR for line in lines):
                    hit += 1
    semantic = sum(1 for r in bugs if r["semantic"] == "yes")
    print(
        f"\nTorchFix: {total_findings} findings; {hit} of {len(bugs)} bugs have one "
        f"within {NEAR} lines"
    )
    print(f"  ({semantic} of the bugs are semantic)")


if __name__ == "__main__":
    main()
