"""The one adapter per capability: its public result -> the typed schema.

``torchwise project`` and the MCP server both call the capabilities through
their public APIs (``review_paths``, ``ckpt.scan``/``ckpt.inspect``,
``model.summarize``, ``doctor.check``) and convert what comes back here, and
only here, so a change in one capability's result touches one function.
Doctor results are read from their documented JSON form (``Report.to_dict``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.project.schema import (
    CheckpointContents,
    CheckpointEntry,
    CheckpointFinding,
    CheckpointScan,
    DoctorCheck,
    DoctorSummary,
    FileFix,
    FindingRow,
    FixPreview,
    LayerRow,
    ModelMeasure,
    ReviewSummary,
    RuleDoc,
    TensorRow,
    Verdict,
)

if TYPE_CHECKING:
    from torchwise.ckpt import FileScan, InspectResult, ScanReport
    from torchwise.model import ModelSummary
    from torchwise.review import Finding, ReviewReport, RuleInfo

SEVERITIES = ("error", "warning", "info")


def relative(path: str | Path, root: Path) -> str:
    """``path`` relative to ``root`` in POSIX form (unchanged when outside it)."""
    try:
        return Path(os.path.abspath(path)).relative_to(root).as_posix()
    except ValueError:
        return Path(path).as_posix()


# -- review ------------------------------------------------------------------------


def finding_row(finding: Finding, root: Path) -> FindingRow:
    from torchwise.review import get_rule

    info = get_rule(finding.code)
    return FindingRow(
        code=finding.code,
        rule=info.name if info else finding.code,
        family=info.family if info else "other",
        severity=finding.severity.value,
        path=relative(finding.path, root),
        line=finding.line,
        column=finding.column,
        message=finding.message,
        fix=finding.fix.title if finding.fix else None,
        fix_applicability=finding.fix.applicability.value if finding.fix else None,
    )


def review_summary(report: ReviewReport, root: Path, *, max_findings: int = 500) -> ReviewSummary:
    rows = [finding_row(f, root) for f in report.findings]
    rows.sort(key=lambda r: (SEVERITIES.index(r.severity), r.path, r.line, r.code))
    by_severity = {severity: 0 for severity in SEVERITIES}
    by_family: dict[str, dict[str, int]] = {}
    for row in rows:
        by_severity[row.severity] += 1
        family = by_family.setdefault(row.family, {severity: 0 for severity in SEVERITIES})
        family[row.severity] += 1
    return ReviewSummary(
        files=len(report.files),
        lines=report.lines,
        by_severity=by_severity,
        by_family=by_family,
        fixable=sum(1 for r in rows if r.fix_applicability in ("safe", "unsafe")),
        findings=rows[:max_findings],
        truncated=max(0, len(rows) - max_findings),
    )


def rule_doc(info: RuleInfo) -> RuleDoc:
    return RuleDoc(
        code=info.code,
        name=info.name,
        family=info.family,
        severity=info.severity.value,
        default_enabled=info.default_enabled,
        fix=info.fix.value if info.fix else None,
        summary=info.summary,
        doc=info.doc,
    )


def fix_preview(report: ReviewReport, root: Path, *, unsafe: bool) -> FixPreview:
    """The diffs of a ``review_paths(..., fix=FixMode(write=False))`` run."""
    import difflib

    files = []
    for file in report.files:
        if file.fixed is None or file.original is None:
            continue
        shown = relative(file.path, root)
        diff = "".join(
            difflib.unified_diff(
                file.original.splitlines(keepends=True),
                file.fixed.splitlines(keepends=True),
                fromfile=f"a/{shown}",
                tofile=f"b/{shown}",
            )
        )
        files.append(FileFix(path=shown, fixes=file.fixes_applied, diff=diff))
    return FixPreview(
        files=files,
        fixes=sum(f.fixes for f in files),
        unsafe_included=unsafe,
        remaining=[finding_row(f, root) for f in report.findings],
    )


# -- checkpoints ---------------------------------------------------------------------


def checkpoint_entry(scan: FileScan, contents: InspectResult | None, root: Path) -> CheckpointEntry:
    path = Path(scan.path)
    verdict = scan.verdict if scan.verdict in ("safe", "warning", "unsafe", "error") else "error"
    return CheckpointEntry(
        path=relative(path, root),
        size_bytes=path.stat().st_size if path.is_file() else 0,
        format=scan.format,
        verdict=verdict,  # type: ignore[arg-type]
        findings=[
            CheckpointFinding(
                severity=f.severity,
                rule=f.rule,
                global_name=f.global_name,
                reason=f.reason,
                call=f.call,
            )
            for f in scan.findings
        ],
        error=scan.error,
        kind=contents.kind if contents else None,
        tensors=len(contents.tensors) if contents else None,
        parameters=contents.parameters if contents else None,
        tensor_bytes=contents.tensor_bytes if contents else None,
    )


def checkpoint_scan(report: ScanReport, root: Path) -> CheckpointScan:
    entries = [checkpoint_entry(file, None, root) for file in report.files]
    order: tuple[Verdict, ...] = ("error", "unsafe", "warning", "safe")
    worst: Verdict = min((e.verdict for e in entries), key=order.index, default="safe")
    return CheckpointScan(verdict=worst, files=entries)


def checkpoint_contents(
    result: InspectResult, root: Path, *, limit: int = 500
) -> CheckpointContents:
    rows = [
        TensorRow(key=t.key, dtype=t.dtype, shape=list(t.shape), role=t.role)
        for t in result.tensors[:limit]
    ]
    return CheckpointContents(
        path=relative(result.path, root),
        format=result.format,
        kind=result.kind,
        parameters=result.parameters,
        buffers=result.buffers,
        optimizer_elements=result.optimizer_elements,
        tensor_bytes=result.tensor_bytes,
        file_size=result.file_size,
        tensors=rows,
        truncated=max(0, len(result.tensors) - limit),
        optimizers=[
            f"{o.key}: state for {o.params_with_state} parameters ({', '.join(o.state_names)})"
            for o in result.optimizers
        ],
        notes=list(result.notes),
    )


# -- models ------------------------------------------------------------------------


def _shapes(values: Any) -> list[list[int]]:
    return [[int(d) for d in shape] for shape in values]


def model_measure(summary: ModelSummary, *, depth: int = 2) -> ModelMeasure:
    """Totals plus the layer rows down to ``depth`` (the root row is left out).

    Read from the documented JSON form (``ModelSummary.to_dict``, docs/inspect.md).
    """
    data = summary.to_dict()
    layers = [
        LayerRow(
            name=layer["name"],
            type=layer["type_name"],
            depth=layer["depth"],
            params=layer["params_total"],
            flops=layer["flops"],
            output_shapes=_shapes(layer["output_shapes"]),
        )
        for layer in data["layers"]
        if 0 < layer["depth"] <= depth
    ]
    training = data.get("training_memory") or {}
    totals = training.get("total_bytes") or {}
    # Adam is what most training uses and the largest of the usual optimizers.
    training_bytes = totals.get("adam", max(totals.values(), default=None))
    return ModelMeasure(
        name=data["model_name"],
        inputs=_shapes(data["input_shapes"]),
        outputs=_shapes(data["output_shapes"]),
        output_dtypes=list(data["output_dtypes"]),
        total_params=data["total_params"],
        trainable_params=data["trainable_params"],
        param_bytes=data["param_bytes"],
        flops_forward=data["flops_forward"],
        macs_forward=data["macs_forward"],
        flops_training=data["flops_training"],
        peak_activation_bytes=data["peak_activation_bytes"],
        training_memory_bytes=None if training_bytes is None else int(training_bytes),
        device=data["device_used"],
        unsupported_ops=dict(data["unsupported_ops"]),
        layers=layers,
        notes=list(data["notes"]),
    )


def doctor_summary(report: Any) -> DoctorSummary:
    """From ``torchwise.doctor.Report`` via its documented JSON form."""
    data = report.to_dict()
    return DoctorSummary(
        target=data["target"],
        inputs=list(data["inputs"]),
        loss=data["loss"],
        ok=bool(data["ok"]),
        counts=dict(data["counts"]),
        checks=[
            DoctorCheck(
                id=check["id"],
                status=check["status"],
                summary=check["summary"],
                where=list(check.get("where", [])),
                evidence=dict(check.get("evidence", {})),
                causes=list(check.get("causes", [])),
                fix=check.get("fix", ""),
                seconds=float(check.get("seconds", 0.0)),
            )
            for check in data["checks"]
        ],
        seconds=float(data["seconds"]),
        notes=list(data.get("notes", [])),
    )


def merge_doctor(parts: list[DoctorSummary]) -> DoctorSummary:
    """One summary from per-check runs (run one at a time to report progress)."""
    first = parts[0]
    checks = [check for part in parts for check in part.checks]
    counts = {status: 0 for status in ("pass", "warn", "fail", "skip")}
    for check in checks:
        counts[check.status] = counts.get(check.status, 0) + 1
    notes: list[str] = []
    for part in parts:
        notes.extend(n for n in part.notes if n not in notes)
    return DoctorSummary(
        target=first.target,
        inputs=first.inputs,
        loss=first.loss,
        ok=all(part.ok for part in parts),
        counts=counts,
        checks=checks,
        seconds=sum(part.seconds for part in parts),
        notes=notes,
    )
