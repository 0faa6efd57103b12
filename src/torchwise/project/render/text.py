"""The terminal report: the knowledge first, then each audit, most important lines first."""

from __future__ import annotations

from collections.abc import Callable

from torchwise.project.render.common import (
    LAYOUT_LABELS,
    command_text,
    doctor_line,
    headline,
    libraries_text,
    merged_sections,
    model_line,
    module_role,
    module_where,
    package_text,
    place,
    plan_text,
    provenance,
    torch_text,
    verdict_text,
)
from torchwise.project.render.numbers import nbytes, seconds
from torchwise.project.schema import ProjectKnowledge, ProjectReport

Paint = Callable[[str, str], str]
#: Findings listed in the terminal; the JSON, Markdown and HTML reports list them all.
SHOWN_FINDINGS = 15


def _plain(text: str, style: str) -> str:
    return text


def knowledge_lines(k: ProjectKnowledge, paint: Paint = _plain) -> list[str]:
    lines = [paint(f"torchwise project: {k.name}", "bold") + f"  ({k.root})", verdict_text(k), ""]
    lines.append(paint("Stack", "bold"))
    known = [p for p in k.stack if p.role != "library"]
    for package in known:
        lines.append(f"  {package.name:<22} {package.role:<22} {package_text(package)}")
    others = [p for p in k.stack if p.role == "library"]
    if others:
        lines.append(
            f"  {'other libraries':<22} {'(files importing)':<22} {libraries_text(others)}"
        )
    if not k.stack:
        lines.append("  (no libraries declared or imported)")
    lines.append(f"  {'python':<22} {'requires':<22} {k.python or 'not declared'}")
    lines += ["", paint("Torch", "bold"), f"  {torch_text(k.torch)}"]
    lines += ["", paint("Layout", "bold")]
    for field, label in LAYOUT_LABELS:
        values: list[str] = getattr(k.layout, field)
        lines.append(f"  {label:<18} {', '.join(values) if values else '-'}")
    lines += ["", paint("Commands", "bold")]
    for command in k.commands:
        lines.append(
            f"  {command.purpose:<9} {command_text(command)}  " + paint(command.source, "dim")
        )
    if not k.commands:
        lines.append("  (none found in Makefile, pyproject scripts, README or CI files)")
    top = sum(m.top_level for m in k.modules)
    lines += ["", paint(f"Modules ({len(k.modules)}, {top} top-level)", "bold")]
    width = max([len(m.name) for m in k.modules] + [8])
    for module in k.modules:
        where = module_where(module)
        lines.append(
            f"  {module.name:<{width}} {module_role(module):<22} {plan_text(module.build)}  "
            + paint(where, "dim")
        )
    lines.extend(f"note: {note}" for note in k.notes)
    return lines


def merged_lines(report: ProjectReport, paint: Paint = _plain) -> list[str]:
    """The merged report: each section, its entries, where they come from."""
    lines: list[str] = []
    run = report.run
    if run is not None:
        lines += ["", paint("Training command", "bold") + f": {run.command}  ({run.source})"]
        lines.append(f"  {run.error or run.ran}")
        lines.extend(f"  note: {note}" for note in run.notes)
    for _, title, entries in merged_sections(report):
        lines += ["", paint(f"{title} ({len(entries)})", "bold")]
        for entry in entries[:SHOWN_FINDINGS]:
            severity = paint(f"{entry.severity or '':<7}", entry.severity or "dim")
            where = place(entry)
            lines.append(f"  {severity} {where + ' ' if where else ''}{entry.title}")
            detail = [", ".join(entry.sources)]
            if provenance(entry):
                detail.append(provenance(entry))
            if entry.evidence:
                detail.append(entry.evidence)
            lines.append("          " + paint("; ".join(detail), "dim"))
        if len(entries) > SHOWN_FINDINGS:
            lines.append(f"  ... and {len(entries) - SHOWN_FINDINGS} more (--format html for all)")
    return lines


def render_text(report: ProjectReport, paint: Paint = _plain) -> str:
    lines = knowledge_lines(report.knowledge, paint)
    lines.insert(2, "  ".join(f"{label}: {value}" for label, value in headline(report)))
    lines += merged_lines(report, paint)
    if report.review is not None:
        r = report.review
        s = r.by_severity
        lines += [
            "",
            paint("Review", "bold")
            + f": {s['error']} errors, {s['warning']} warnings, {s['info']} info in "
            f"{r.files} files ({r.fixable} fixable with torchwise review --fix)",
        ]
        listed = [] if report.merged else r.findings[:SHOWN_FINDINGS]  # else merged above
        for row in listed:
            severity = paint(f"{row.severity:<7}", row.severity)
            lines.append(
                f"  {severity} {row.path}:{row.line}:{row.column} {row.code} {row.message}"
            )
        hidden = len(r.findings) + r.truncated - SHOWN_FINDINGS
        if hidden > 0 and listed:
            lines.append(f"  ... and {hidden} more (torchwise review for all, or --format html)")
    if report.checkpoints:
        lines += ["", paint(f"Checkpoints ({len(report.checkpoints)})", "bold")]
        for entry in report.checkpoints:
            style = {"safe": "pass", "warning": "warn", "unsafe": "fail"}.get(entry.verdict, "fail")
            contents = (
                f"{entry.kind}, {entry.tensors} tensors, {entry.parameters:,} parameters"
                if entry.tensors is not None and entry.parameters is not None
                else (entry.error or "")
            )
            lines.append(
                f"  {paint(f'{entry.verdict.upper():<8}', style)} {entry.path}  "
                f"{nbytes(entry.size_bytes)}  {contents}"
            )
            for finding in entry.findings[:3]:
                lines.append(f"           {finding.severity}: {finding.reason}")
    if report.models:
        lines += ["", paint("Models", "bold")]
        for audit in report.models:
            inputs = ", ".join(audit.inputs) or "no inputs"
            lines.append(
                f"  {paint(audit.name, 'bold')} ({audit.path}) on {inputs} [{audit.inputs_source}]"
            )
            lines.append(f"    inspect  {model_line(audit)}")
            if audit.doctor is not None or audit.measure is not None:
                lines.append(f"    doctor   {doctor_line(audit)}")
            if audit.error and audit.measure is not None:
                lines.append(f"    error    {audit.error}")
            if audit.command and audit.measure is not None:
                lines.append("    again    " + paint(audit.command, "dim"))
    lines.extend(f"note: {note}" for note in report.notes)
    if report.timings:
        spent = ", ".join(f"{phase} {seconds(t)}" for phase, t in report.timings.items())
        lines += ["", paint(f"Took {spent}.", "dim")]
    return "\n".join(lines) + "\n"
