"""``--format markdown``: the review a senior PyTorch engineer would write.

Sections: a summary (files, lines, counts), critical issues (every error, with
the code excerpt), performance, best practices (warnings and hints grouped by
family, each with why it matters and the fix), what the code already does well
(good practices found in the source, see :mod:`torchwise.review.praise`), and
testing recommendations (the ``torchwise doctor`` checks that would catch the
flagged bug classes at run time).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from torchwise.review.files import SourceFile, read_source
from torchwise.review.findings import Applicability, Finding, Severity
from torchwise.review.output import RenderOptions
from torchwise.review.output.sarif import rule_url
from torchwise.review.praise import SIGNALS, collect_praise
from torchwise.review.registry import FAMILIES, RuleInfo, get_rule, section
from torchwise.review.runner import ReviewReport

MAX_EXCERPTS = 25  # critical issues shown with code; the rest are listed
MAX_LOCATIONS = 8  # locations listed per rule before "and N more"

#: (code prefixes, doctor checks, what they catch): derived from the findings.
TESTING: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("TW101", "TW102", "TW103", "TW107", "TW120", "TW126"), ("param-update", "overfit-batch"),
     "every parameter changes after one optimizer step and the model can overfit one batch"),
    (("TW104", "TW105", "TW133"), ("eval-determinism", "train-eval-gap"),
     "evaluation is deterministic and dropout/batch-norm switch modes as intended"),
    (("TW108", "TW125", "TW131", "TW113"), ("grad-flow",),
     "every parameter receives a finite, non-zero gradient"),
    (("TW129",), ("batch-independence",),
     "a sample's output does not depend on the other samples of the batch"),
    (("TW109", "TW110"), ("grad-scale", "amp-drift"),
     "mixed precision keeps gradients finite and outputs close to float32"),
    (("TW127", "TW5"), ("init-loss", "nan-inf"),
     "the loss at initialisation is near its expected value and nothing overflows"),
    (("TW121", "TW140", "TW206", "TW2"), ("device-consistency",),
     "every buffer and created tensor follows the model to its device"),
    (("TW6",), ("determinism",),
     "two seeded runs give the same results"),
)  # fmt: skip


def render(report: ReviewReport, options: RenderOptions) -> str:
    findings = report.findings
    sources = _Sources()
    out: list[str] = ["# torchwise review", ""]
    out += _summary(report)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    performance = [f for f in findings if f not in errors and _family(f) == "performance"]
    practices = [f for f in findings if f not in errors and f not in performance]

    out += ["## Critical issues", ""]
    if not errors:
        out += ["None: no finding is an almost-certain bug.", ""]
    for number, finding in enumerate(errors, start=1):
        if number > MAX_EXCERPTS:
            rest = errors[MAX_EXCERPTS:]
            out += [f"And {len(rest)} more:", ""]
            out += [f"- `{f.location}` **{f.code}** {f.message}" for f in rest] + [""]
            break
        out += _critical(number, finding, sources)

    out += ["## Performance", ""]
    out += _grouped(performance) if performance else ["No performance findings.", ""]
    out += ["## Best practices", ""]
    if not practices:
        out += ["No warnings or hints beyond the issues above.", ""]
    by_family: dict[str, list[Finding]] = defaultdict(list)
    for finding in practices:
        by_family[_family(finding)].append(finding)
    for family in [*FAMILIES, "other"]:
        if by_family.get(family):
            out += [f"### {FAMILIES.get(family, 'Other')}", "", *_grouped(by_family[family])]

    out += ["## What the code already does well", ""]
    out += _praise(report, findings, sources)
    out += ["## Testing recommendations", ""]
    out += _testing(findings)
    return "\n".join(out).rstrip() + "\n"


def _summary(report: ReviewReport) -> list[str]:
    findings = report.findings
    files = len(report.files)
    severities = Counter(f.severity for f in findings)
    lines = [
        f"Reviewed **{files} file{'s' * (files != 1)}** ({report.lines:,} lines): "
        f"**{len(findings)} finding{'s' * (len(findings) != 1)}**"
        + (
            " ("
            + ", ".join(
                f"{severities[level]} {level.value}{'s' * (severities[level] != 1)}"
                for level in Severity
                if severities[level]
            )
            + ")."
            if findings
            else "."
        ),
        "",
    ]
    if not findings:
        return lines
    lines += ["| code | rule | severity | count | fix |", "|---|---|---|---:|---|"]
    for code, count in sorted(Counter(f.code for f in findings).items()):
        info = get_rule(code)
        name = f"[{info.name}]({rule_url(info)})" if info else ""
        fix = info.fix.value if info and info.fix else ""
        severity = info.severity.value if info else ""
        lines.append(f"| {code} | {name} | {severity} | {count} | {fix} |")
    safe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.SAFE)
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.UNSAFE)
    lines.append("")
    if safe:
        lines += [f"`torchwise review --fix` applies {safe} safe fix{'es' * (safe != 1)}.", ""]
    if unsafe:
        lines += [f"{unsafe} more fix{'es' * (unsafe != 1)} need `--unsafe-fixes` and a look.", ""]
    return lines


def _critical(number: int, finding: Finding, sources: _Sources) -> list[str]:
    info = get_rule(finding.code)
    name = info.name if info else ""
    out = [
        f"### {number}. `{finding.code}` {name}: `{finding.location}`",
        "",
        finding.message + ".",
        "",
    ]
    excerpt = sources.excerpt(finding)
    if excerpt:
        out += ["```python", *excerpt, "```", ""]
    if info is not None:
        out += _why_and_fix(info, finding)
    return out


def _why_and_fix(info: RuleInfo, finding: Finding | None) -> list[str]:
    why = _first_sentences(section(info.doc, "## Why is this bad?"))
    out = [f"**Why it matters.** {why}", ""] if why else []
    if finding is not None and finding.fix is not None:
        kind = "safe" if finding.fix.applicability is Applicability.SAFE else "unsafe"
        out += [f"**Fix** ({kind}, `torchwise review --fix`): {finding.fix.title}.", ""]
    better = info.use_instead().rstrip()
    if better:
        out += ["**Instead:**", "", "```python", better, "```", ""]
    out += [f"[{info.code} documentation]({rule_url(info)})", ""]
    return out


def _grouped(findings: list[Finding]) -> list[str]:
    out: list[str] = []
    by_code: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        by_code[finding.code].append(finding)
    for code, group in sorted(by_code.items()):
        info = get_rule(code)
        name = info.name if info else ""
        out += [f"#### `{code}` {name} ({len(group)})", ""]
        for finding in group[:MAX_LOCATIONS]:
            out.append(f"- `{finding.location}`: {finding.message}")
        if len(group) > MAX_LOCATIONS:
            out.append(f"- and {len(group) - MAX_LOCATIONS} more")
        out.append("")
        if info is not None:
            fixable = next((f for f in group if f.fix is not None), None)
            out += _why_and_fix(info, fixable)
    return out


def _praise(report: ReviewReport, findings: list[Finding], sources: _Sources) -> list[str]:
    present = {f.code for f in findings}
    where: dict[str, list[str]] = defaultdict(list)
    for file in report.files:
        source = sources.get(file.path)
        if source is None:
            continue
        for key, lines in collect_praise(source.source, file.path).lines.items():
            where[key] += [_place(source, line) for line in lines]
    out = []
    for key, signal in SIGNALS.items():
        places = where.get(key)
        if not places or present.intersection(signal.contradicted_by):
            continue
        shown = ", ".join(f"`{place}`" for place in places[:3])
        more = f" and {len(places) - 3} more" if len(places) > 3 else ""
        out.append(f"- {signal.text} Seen at {shown}{more}.")
    if not out:
        return [
            "Nothing to single out: no good practice was found without a finding against it.",
            "",
        ]
    return [*out, ""]


def _testing(findings: list[Finding]) -> list[str]:
    present = sorted({f.code for f in findings})
    out = []
    for prefixes, checks, what in TESTING:
        codes = [code for code in present if code.startswith(prefixes)]
        if not codes:
            continue
        flagged = ", ".join(codes)
        out += [
            f"- Findings {flagged}: run `torchwise doctor path/to/model.py:Model --input "
            f'"f32[8,...]" --checks {",".join(checks)}` to check at run time that {what}.',
        ]
    if not out:
        return [
            "No finding points at a run-time failure mode. `torchwise doctor` still checks "
            "gradient flow, batch independence and evaluation determinism of a model in seconds.",
            "",
        ]
    return [*out, ""]


def _family(finding: Finding) -> str:
    info = get_rule(finding.code)
    return info.family if info is not None else "other"


def _first_sentences(text: str, count: int = 2) -> str:
    words = " ".join(text.split())
    sentences = [part for part in words.replace(". ", ".\n").split("\n") if part]
    return " ".join(sentences[:count])


def _place(source: SourceFile, line: int) -> str:
    if source.cells is not None and 0 < line <= len(source.cells):
        cell, cell_line = source.cells[line - 1]
        return f"{source.path}:cell {cell}:{cell_line}"
    return f"{source.path}:{line}"


class _Sources:
    """Files read once for excerpts and praise (a report never re-analyses)."""

    def __init__(self) -> None:
        self._files: dict[str, SourceFile | None] = {}

    def get(self, path: str) -> SourceFile | None:
        if path not in self._files:
            try:
                self._files[path] = read_source(Path(path))
            except ValueError:
                self._files[path] = None
        return self._files[path]

    def excerpt(self, finding: Finding, context: int = 2) -> list[str]:
        source = self.get(finding.path)
        if source is None:
            return []
        lines = source.source.splitlines()
        first, last = max(finding.line - context, 1), min(finding.end_line + context, len(lines))
        width = len(str(last))
        shown = []
        for number in range(first, last + 1):
            marker = ">" if finding.line <= number <= finding.end_line else " "
            label = number
            if source.cells is not None and number <= len(source.cells):
                label = source.cells[number - 1][1]
            shown.append(f"{marker}{label:>{width}} | {lines[number - 1]}")
        return shown
