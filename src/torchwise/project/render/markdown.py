"""The Markdown report, and the Project Knowledge section agent definitions embed."""

from __future__ import annotations

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


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"``{text}``"


def knowledge_markdown(k: ProjectKnowledge, *, heading: str = "##") -> str:
    """The project knowledge as Markdown: stack, torch, layout, commands, models.

    Deterministic (no timings, no absolute paths), so a file that embeds it changes
    only when the project does.
    """
    lines = [f"{heading} Project knowledge", "", f"`{k.name}` is {verdict_text(k)}.", ""]
    lines.append(f"- **torch**: {torch_text(k.torch)}")
    lines.append(f"- **python**: {k.python or 'not declared'}")
    for package in k.stack:
        if package.name != "torch" and package.role != "library":
            lines.append(f"- **{package.name}** ({package.role}): {package_text(package)}")
    others = [p for p in k.stack if p.role == "library"]
    if others:
        lines.append(f"- other libraries (files importing each): {libraries_text(others)}")
    lines.append("")
    for field, label in LAYOUT_LABELS:
        values: list[str] = getattr(k.layout, field)
        shown = ", ".join(_code(v) for v in values) if values else "none found"
        lines.append(f"- {label}: {shown}")
    lines += ["", f"{heading}# Commands", ""]
    if k.commands:
        for command in k.commands:
            lines.append(f"- {command.purpose}: {command_text(command, _code)} ({command.source})")
    else:
        lines.append("None documented (Makefile, pyproject scripts, README, CI files).")
    lines += ["", f"{heading}# Models", ""]
    top = [m for m in k.modules if m.top_level or m.build.how == "configured"]
    if top:
        lines += [
            "| class | file | kind | how torchwise builds it | inputs |",
            "|---|---|---|---|---|",
        ]
        for module in top:
            inputs = ", ".join(_code(spec) for spec in module.build.inputs) or "-"
            lines.append(
                f"| `{module.name}` | `{module_where(module)}` | {module_role(module)} | "
                f"{_cell(plan_text(module.build, _code))} | {_cell(inputs)} |"
            )
        parts = [m.name for m in k.modules if m not in top]
        if parts:
            lines += ["", f"Components: {', '.join(f'`{name}`' for name in parts)}."]
    else:
        lines.append("No `nn.Module` classes found.")
    if k.checkpoints:
        shown = ", ".join(_code(c) for c in k.checkpoints[:10])
        more = f" and {len(k.checkpoints) - 10} more" if len(k.checkpoints) > 10 else ""
        lines += ["", f"Checkpoints: {shown}{more}."]
    return "\n".join(lines) + "\n"


def merged_markdown(report: ProjectReport) -> list[str]:
    """The merged report: the training run, then each section as a table."""
    lines: list[str] = []
    run = report.run
    if run is not None:
        outcome = run.error or run.ran
        lines += ["## Training command", "", f"`{run.command}` ({run.source}): {outcome}"]
        lines += [f"- note: {note}" for note in run.notes] + [""]
    for _, title, entries in merged_sections(report):
        lines += [f"## {title}", "", "| | where | what | found by | evidence |"]
        lines.append("|---|---|---|---|---|")
        for entry in entries:
            found = ", ".join(entry.sources)
            if provenance(entry):
                found += f" ({provenance(entry)})"
            where = f"`{place(entry)}`" if place(entry) else ""
            lines.append(
                f"| {entry.severity or ''} | {where} | {_cell(entry.title)} | {_cell(found)} | "
                f"{_cell(entry.evidence)} |"
            )
        lines.append("")
    return lines


def render_markdown(report: ProjectReport) -> str:
    k = report.knowledge
    lines = [f"# torchwise project: `{k.name}`", ""]
    lines.append(" · ".join(f"**{label}**: {value}" for label, value in headline(report)))
    lines += ["", knowledge_markdown(k).rstrip(), ""]
    lines += merged_markdown(report)
    if report.review is not None:
        r = report.review
        s = r.by_severity
        lines += [
            "## Review",
            "",
            f"{s['error']} errors, {s['warning']} warnings and {s['info']} info in {r.files} "
            f"files; {r.fixable} fixable with `torchwise review --fix`.",
            "",
        ]
        if r.findings:
            lines += ["| severity | where | rule | message |", "|---|---|---|---|"]
            for row in r.findings:
                lines.append(
                    f"| {row.severity} | `{row.path}:{row.line}` | {row.code} {row.rule} | "
                    f"{_cell(row.message)} |"
                )
            if r.truncated:
                lines.append(f"\n{r.truncated} more findings are not listed.")
            lines.append("")
    if report.checkpoints:
        lines += ["## Checkpoints", "", "| file | verdict | size | contents |", "|---|---|---|---|"]
        for entry in report.checkpoints:
            contents = (
                f"{entry.kind}, {entry.tensors} tensors, {entry.parameters:,} parameters"
                if entry.tensors is not None and entry.parameters is not None
                else _cell(entry.error or "")
            )
            reasons = "; ".join(_cell(f.reason) for f in entry.findings[:3])
            verdict = f"**{entry.verdict}**" + (f": {reasons}" if reasons else "")
            lines.append(
                f"| `{entry.path}` | {verdict} | {nbytes(entry.size_bytes)} | {contents} |"
            )
        lines.append("")
    if report.models:
        lines += ["## Models measured", ""]
        for audit in report.models:
            inputs = ", ".join(f"`{spec}`" for spec in audit.inputs) or "no inputs"
            lines += [
                f"### `{audit.name}` ({audit.path})",
                "",
                f"- inputs: {inputs} ({audit.inputs_source})",
            ]
            lines.append(f"- inspect: {model_line(audit)}")
            lines.append(f"- doctor: {doctor_line(audit)}")
            if audit.error and audit.measure is not None:
                lines.append(f"- error: {audit.error}")
            if audit.command and audit.measure is not None:
                lines.append(f"- again: `{audit.command}`")
            if audit.doctor is not None:
                flagged = [c for c in audit.doctor.checks if c.status in ("fail", "warn")]
                for check in flagged:
                    lines.append(f"  - **{check.status}** `{check.id}`: {check.summary}")
            lines.append("")
    if report.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in report.notes] + [""]
    if report.timings:
        spent = ", ".join(f"{phase} {seconds(t)}" for phase, t in report.timings.items())
        lines.append(f"_torchwise {report.torchwise_version}; took {spent}._")
    return "\n".join(lines).rstrip() + "\n"
