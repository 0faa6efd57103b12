"""``--format markdown``: the review a senior PyTorch engineer would write.

One entry per problem (a rule), with every place it occurs, ordered by impact:
what silently changes results first, then what crashes, what is unsafe, what
makes runs unrepeatable, what is slow, what is merely deprecated. Each problem
says once why it matters and what to write instead. Then what the code already
does well (never a line that is also flagged), and how to check the findings at
run time on the project's own model (a resolved ``file.py:Class``, its input
inferred from its first layer) with the ``torchwise doctor`` checks that match.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from torchwise.findings import Applicability, Finding, Severity
from torchwise.review.files import SourceFile, read_source
from torchwise.review.output import RenderOptions
from torchwise.review.output.sarif import rule_url
from torchwise.review.praise import SIGNALS
from torchwise.review.registry import IMPACTS, RuleInfo, get_rule, section
from torchwise.review.runner import ReviewReport

MAX_EXCERPTS = 25  # problems shown with code; the rest are listed
MAX_LOCATIONS = 8  # places listed per problem before "and N more"

#: Run-time checks of `torchwise doctor` that catch each kind of finding, by code
#: prefix, with what they verify.
CHECKS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("TW101", "TW102", "TW103", "TW107", "TW118", "TW119", "TW142", "TW120"),
     ("param-update", "overfit-batch"),
     "every parameter changes after one optimizer step and the model can overfit one batch"),
    (("TW104", "TW105", "TW116", "TW133", "TW135", "TW138"),
     ("eval-determinism", "train-eval-gap"),
     "evaluation is deterministic and dropout and batch norm switch modes as intended"),
    (("TW108", "TW117", "TW125", "TW131", "TW113"), ("grad-flow",),
     "every parameter receives a finite, non-zero gradient"),
    (("TW129",), ("batch-independence",),
     "a sample's output does not depend on the other samples of its batch"),
    (("TW109", "TW110"), ("grad-scale", "amp-drift"),
     "mixed precision keeps gradients finite and outputs close to float32"),
    (("TW127", "TW139", "TW5"), ("init-loss", "nan-inf"),
     "the loss at initialisation is near its expected value and nothing overflows"),
    (("TW121", "TW122", "TW126", "TW140", "TW206"), ("device-consistency",),
     "every buffer and created tensor follows the model to its device"),
    (("TW6",), ("determinism",), "two seeded runs give the same results"),
)  # fmt: skip

_IMPACT_ORDER = {impact: rank for rank, impact in enumerate(IMPACTS)}


@dataclass
class Problem:
    """Every finding of one rule: one entry of the review."""

    code: str
    info: RuleInfo | None
    findings: list[Finding]

    @property
    def severity(self) -> Severity:
        return self.findings[0].severity

    @property
    def impact(self) -> str:
        return self.info.impact if self.info else "results"

    def sort_key(self) -> tuple[int, int, int, str]:
        return (
            self.severity.rank,
            _IMPACT_ORDER.get(self.impact, len(_IMPACT_ORDER)),
            -len(self.findings),
            self.code,
        )


def problems(findings: list[Finding]) -> list[Problem]:
    by_code: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        by_code[finding.code].append(finding)
    found = [Problem(code, get_rule(code), group) for code, group in by_code.items()]
    return sorted(found, key=Problem.sort_key)


def render(report: ReviewReport, options: RenderOptions) -> str:
    sources = _Sources()
    found = problems(report.findings)
    out: list[str] = ["# torchwise review", ""]
    out += _summary(report, found)
    errors = [p for p in found if p.severity is Severity.ERROR]
    warnings = [p for p in found if p.severity is Severity.WARNING]
    hints = [p for p in found if p.severity is Severity.INFO]

    out += ["## Critical issues", ""]
    if not errors:
        out += ["None: no finding is an almost-certain bug.", ""]
    for number, problem in enumerate(errors, start=1):
        if number > MAX_EXCERPTS:
            rest = errors[MAX_EXCERPTS:]
            out += [f"And {len(rest)} more:", ""]
            out += [f"- **{p.code}** {_name(p)}: {len(p.findings)} places" for p in rest] + [""]
            break
        out += _problem(f"### {number}.", problem, sources, excerpt=True)

    bugs = [p for p in warnings if p.impact not in {"performance", "maintenance"}]
    out += ["## Likely bugs and traps", ""]
    if not bugs:
        out += ["None beyond the critical issues.", ""]
    for problem in bugs:
        out += _problem("###", problem, sources, excerpt=True)
    # Performance and deprecations are grouped by what they are, hints or not.
    lesser = warnings + hints
    slow = [p for p in lesser if p.impact == "performance"]
    out += ["## Performance", ""]
    if not slow:
        out += ["No performance findings.", ""]
    for problem in slow:
        out += _problem("###", problem, sources, excerpt=False)
    dated = [p for p in lesser if p.impact == "maintenance"]
    hints = [p for p in hints if p.impact not in {"performance", "maintenance"}]
    if dated:
        out += ["## Deprecated and fragile code", ""]
        for problem in dated:
            out += _problem("###", problem, sources, excerpt=False)
    if hints:
        out += ["## Hints", ""]
        for problem in hints:
            out += _problem("###", problem, sources, excerpt=False)

    out += ["## What the code already does well", ""]
    out += _praise(report, sources)
    out += ["## Testing recommendations", ""]
    out += _testing(report, found, options.models)
    return "\n".join(out).rstrip() + "\n"


def _summary(report: ReviewReport, found: list[Problem]) -> list[str]:
    findings = report.findings
    files = len(report.files)
    severities = Counter(f.severity for f in findings)
    counts = ", ".join(
        f"{severities[level]} {level.value}{'s' * (severities[level] != 1)}"
        for level in Severity
        if severities[level]
    )
    lines = [
        f"Reviewed **{files} file{'s' * (files != 1)}** ({report.lines:,} lines): "
        f"**{len(findings)} finding{'s' * (len(findings) != 1)}**"
        + (
            f" ({counts}) in **{len(found)} problem{'s' * (len(found) != 1)}**."
            if findings
            else "."
        ),
        "",
    ]
    if not findings:
        return lines
    lines += ["| code | rule | severity | impact | places | fix |", "|---|---|---|---|---:|---|"]
    for problem in found:
        info = problem.info
        name = f"[{info.name}]({rule_url(info)})" if info else ""
        fix = info.fix.value if info and info.fix else ""
        lines.append(
            f"| {problem.code} | {name} | {problem.severity.value} | {problem.impact} "
            f"| {len(problem.findings)} | {fix} |"
        )
    safe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.SAFE)
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.UNSAFE)
    lines.append("")
    if safe:
        lines += [f"`torchwise review --fix` applies {safe} safe fix{'es' * (safe != 1)}.", ""]
    if unsafe:
        lines += [f"{unsafe} more fix{'es' * (unsafe != 1)} need `--unsafe-fixes` and a look.", ""]
    return lines


def _name(problem: Problem) -> str:
    return problem.info.name if problem.info else ""


def _problem(heading: str, problem: Problem, sources: _Sources, *, excerpt: bool) -> list[str]:
    findings = problem.findings
    places = len(findings)
    where = f"`{findings[0].location}`" if places == 1 else f"{places} places"
    out = [f"{heading} `{problem.code}` {_name(problem)}: {where}", ""]
    messages = {f.message for f in findings}
    if len(messages) == 1:
        out += [findings[0].message + ".", ""]
    if places > 1:
        for finding in findings[:MAX_LOCATIONS]:
            detail = "" if len(messages) == 1 else f": {finding.message}"
            out.append(f"- `{finding.location}`{detail}")
        if places > MAX_LOCATIONS:
            out.append(f"- and {places - MAX_LOCATIONS} more")
        out.append("")
    if excerpt:
        shown = sources.excerpt(findings[0])
        if shown:
            out += ["```python", *shown, "```", ""]
    if problem.info is not None:
        fixable = next((f for f in findings if f.fix is not None), None)
        out += _why_and_fix(problem.info, fixable)
    return out


def _why_and_fix(info: RuleInfo, finding: Finding | None) -> list[str]:
    why = _first_sentences(section(info.doc, "## Why is this bad?"))
    out = [f"**Why it matters.** {why}", ""] if why else []
    if finding is not None and finding.fix is not None:
        kind = "safe" if finding.fix.applicability is Applicability.SAFE else "unsafe"
        flag = "--fix" if kind == "safe" else "--fix --unsafe-fixes"
        out += [f"**Fix** ({kind}, `torchwise review {flag}`): {finding.fix.title}.", ""]
    better = info.use_instead().rstrip()
    if better:
        out += ["**Instead:**", "", "```python", better, "```", ""]
    out += [f"[{info.code} documentation]({rule_url(info)})", ""]
    return out


def _praise(report: ReviewReport, sources: _Sources) -> list[str]:
    present = {f.code for f in report.findings}
    flagged = {(f.path, f.line) for f in report.findings}
    where: dict[str, list[str]] = defaultdict(list)
    for file in report.files:
        source = sources.get(file.path)
        if source is None:
            continue
        for key, lines in file.praise.items():
            # Never praise a line that is also flagged.
            where[key] += [
                _place(source, line) for line in lines if (file.path, line) not in flagged
            ]
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


def _testing(
    report: ReviewReport, found: list[Problem], models: tuple[tuple[str, str], ...]
) -> list[str]:
    codes = sorted(problem.code for problem in found)
    checks: list[tuple[list[str], tuple[str, ...], str]] = []
    for prefixes, ids, what in CHECKS:
        matched = [code for code in codes if code.startswith(prefixes)]
        if matched:
            checks.append((matched, ids, what))
    target = (models[0][0], f" (`{models[0][1]}` in [tool.torchwise.models])") if models else None
    found_model = report.main_model()
    target = target or (None if found_model is None else (found_model.command, found_model.note))
    if target is None:
        if not checks:
            return [
                "No finding points at a run-time failure mode, and no `nn.Module` of the "
                "project was found to test.",
                "",
            ]
        out = [
            "No `nn.Module` class of the project could be resolved to test; with your model:",
            "",
        ]
        for matched, ids, what in checks:
            out.append(
                f"- {', '.join(matched)}: `torchwise doctor <file.py>:<Model> --input <spec> "
                f"--checks {','.join(ids)}` checks at run time that {what}."
            )
        return [*out, ""]
    command, note = target
    out = [f"The project's model: `{command}`{note}.", ""]
    if not checks:
        out += [
            "No finding points at a specific run-time failure mode; the full health check "
            "(gradient flow, batch independence, evaluation determinism, ...) runs in seconds:",
            "",
            "```bash",
            f"torchwise doctor {command}",
            "```",
            "",
        ]
        return out
    for matched, ids, what in checks:
        out += [
            f"- **{', '.join(matched)}**: check that {what}:",
            "",
            "  ```bash",
            f"  torchwise doctor {command} --checks {','.join(ids)}",
            "  ```",
            "",
        ]
    return out


def _relative(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


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
