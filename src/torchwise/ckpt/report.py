"""Render inspect and scan results: text for people, JSON and SARIF 2.1.0 for tools."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchwise.sarif import REPOSITORY, artifact_location, sarif_log
from torchwise.units import nbytes

if TYPE_CHECKING:
    from torchwise.ckpt.contents import InspectResult
    from torchwise.ckpt.conversion.convert import ConvertResult
    from torchwise.ckpt.folders import IndexView
    from torchwise.ckpt.scan import FileScan, ScanReport

#: SARIF rule id -> (name, default level, short description)
SARIF_RULES: dict[str, tuple[str, str, str]] = {
    "TWC001": ("dangerous-global", "error", "The pickle calls a known-dangerous function."),
    "TWC002": ("unsafe-global", "error", "The pickle imports a global outside the allowlist."),
    "TWC003": ("non-tensor-object", "warning", "A known-benign object that is not a tensor."),
    "TWC004": ("malformed-pickle", "error", "An opcode sequence the scan cannot vet."),
    "TWC005": ("torchscript-code", "error", "A TorchScript archive: torch.load runs its code."),
    "TWC006": ("unreadable-checkpoint", "error", "torch.load would fail on the file."),
    "TWC007": ("archive-confusion", "error", "A zip/tar/frame construction readers disagree on."),
    "TWC008": ("too-large-to-vet", "error", "A limit was reached before the file was vetted."),
    "TWC009": ("native-code", "error", "A compiled library a loader would run."),
    "TWC010": ("archive-checksum", "warning", "A checksum torch ignores and zipfile refuses."),
    "TWC011": ("shard-outside-folder", "error", "An index names a shard outside its folder."),
}
_RULE_IDS = {name: rule_id for rule_id, (name, _, _) in SARIF_RULES.items()}


def inspect_text(result: InspectResult, max_rows: int | None = None) -> str:
    """The human report. ``max_rows`` None (``--all``) lists every tensor, optimizer state
    included; otherwise optimizer state is summarised per optimizer (as torchinfo users
    expect a summary) and the table stops after ``max_rows`` rows."""
    lines = [
        f"{result.path}: {result.format}, {result.kind}",
        f"{nbytes(result.bytes_read)} read from {nbytes(result.file_size)} "
        "(pickles, zip directory and headers only; nothing was executed)",
        "",
    ]
    listed = result.tensors
    if max_rows is not None:
        listed = [t for t in result.tensors if t.role != "optimizer"]
    rows = listed if max_rows is None else listed[:max_rows]
    if rows:
        width = min(60, max(len(t.key) for t in rows))
        lines.append(f"{'key':<{width}}  {'dtype':<9} {'shape':<18} {'role':<9} notes")
        for t in rows:
            notes = []
            if t.kind != "tensor":
                notes.append(t.kind)
            if not t.contiguous:
                notes.append("non-contiguous")
            if t.alias_of:
                notes.append(f"same tensor as {t.alias_of} (its storage)")
            elif t.aliases:
                notes.append(f"same tensor as {', '.join(t.aliases)}")
            if t.shares_storage_with:
                notes.append(f"shares storage with {', '.join(t.shares_storage_with[:3])}")
            shape = "[" + ", ".join(map(str, t.shape)) + "]"
            lines.append(
                f"{t.key:<{width}}  {t.dtype:<9} {shape:<18} {t.role:<9} {'; '.join(notes)}"
            )
        if len(rows) < len(listed):
            lines.append(f"... {len(listed) - len(rows)} more (--all lists every tensor)")
        lines.append("")
    lines.append(
        f"tensors {len(result.tensors)} · parameters {result.parameters:,} · "
        f"buffers {result.buffers:,} · optimizer state {result.optimizer_elements:,} elements · "
        f"storage {nbytes(result.tensor_bytes)}"
    )
    for opt in result.optimizers:
        groups = "; ".join(
            ", ".join(
                f"{k}={v}"
                for k, v in g.items()
                if k in ("lr", "betas", "momentum", "weight_decay", "eps", "params")
            )
            for g in opt.param_groups
        )
        lines.append(
            f"optimizer {opt.key}: state for {opt.params_with_state} parameters "
            f"({', '.join(opt.state_names) or 'none'}); param groups: {groups or 'none'}"
        )
        if max_rows is not None:
            lines.append(_optimizer_summary(result, opt.key))
    outline = _outline(result.structure)
    if outline:
        lines += ["", "structure:", *outline]
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def _optimizer_summary(result: InspectResult, key: str) -> str:
    prefix = "" if key == "<root>" else f"{key}."
    state = [t for t in result.tensors if t.role == "optimizer" and t.key.startswith(prefix)]
    by_name: dict[str, int] = {}
    for t in state:
        name = t.key.rsplit(".", 1)[-1]
        by_name[name] = by_name.get(name, 0) + t.numel
    parts = ", ".join(f"{name} {numel:,}" for name, numel in sorted(by_name.items()))
    return (
        f"  {len(state)} state tensors, {sum(by_name.values()):,} elements"
        + (f" ({parts})" if parts else "")
        + " (--all lists each)"
    )


def _outline(node: Any, indent: str = "  ", depth: int = 0) -> list[str]:
    """Non-tensor structure, tensors collapsed (they are in the table)."""
    out: list[str] = []
    if not isinstance(node, dict) or depth > 4:
        return out
    for key, value in node.items():
        if isinstance(value, dict) and value and depth < 4:
            tensors = sum(
                1 for v in value.values() if isinstance(v, str) and v.startswith("<tensor")
            )
            if tensors == len(value):
                out.append(f"{indent}{key}: <{tensors} tensors>")
                continue
            out.append(f"{indent}{key}:")
            out += _outline(value, indent + "  ", depth + 1)
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            out.append(f"{indent}{key}: {text if len(text) < 100 else text[:97] + '...'}")
    return out


_VERDICT_STYLE = {"safe": "ok", "warning": "warning", "unsafe": "fail", "error": "error"}
#: rules whose findings come from a pickle (the others from structure: no loader to name)
_PICKLED = frozenset({"dangerous-global", "unsafe-global", "malformed-pickle"})


def scan_text(report: ScanReport, paint: Callable[[str, str], str] | None = None) -> str:
    """The human report; ``paint(text, style)`` colours verdicts (see torchwise.console)."""
    colour = paint or (lambda text, style: text)
    lines: list[str] = []
    for f in report.files:
        verdict = colour(f.verdict.upper(), _VERDICT_STYLE[f.verdict])
        lines.append(f"{f.path}: {verdict} ({f.format})")
        if f.error:
            lines.append(f"  error: {f.error}")
        for finding in f.findings:
            what = finding.global_name or finding.rule
            where = f"{finding.member} @ byte {finding.offset}"
            lines.append(f"  {colour(f'{finding.severity:<9}', _severity_style(finding.severity))} "
                         f"{what}  [{where}]")  # fmt: skip
            lines.append(f"            {finding.reason}")
            if finding.call:
                lines.append(f"            would call: {finding.call}")
            if finding.severity != "warning" and (finding.loaders or finding.rule in _PICKLED):
                lines.append(f"            {_who_runs(finding.loaders)}")
        lines += [f"  note: {note}" for note in f.notes]
    for index in report.indexes:
        lines += _index_lines(index, colour)
    if report.skipped:
        lines.append(
            f"{len(report.skipped)} file(s) looked like a format but no loader reads them "
            f"(not judged): {', '.join(report.skipped[:5])}"
        )
    counts = {
        v: sum(1 for f in report.files if f.verdict == v)
        for v in ("safe", "warning", "unsafe", "error")
    }
    lines.append(", ".join(f"{n} {v}" for v, n in counts.items() if n) or "0")
    lines[-1] += " file(s)"
    return "\n".join(lines)


def _who_runs(loaders: list[str]) -> str:
    if not loaders:
        return "in the file, though no modelled loader reaches it: judged all the same"
    return f"runs under: {', '.join(loaders)}"


def _index_lines(index: IndexView, colour: Callable[[str, str], str]) -> list[str]:
    if index.error:
        return [f"{index.path}: {colour('ERROR', 'error')} (index)", f"  error: {index.error}"]
    state = "UNSAFE" if index.outside else "ERROR" if index.missing else "OK"
    style = {"UNSAFE": "fail", "ERROR": "error", "OK": "ok"}[state]
    lines = [f"{index.path}: {colour(state, style)} (index of {len(index.shards)} shard(s); "
             "each file is judged above)"]  # fmt: skip
    if index.outside:
        lines.append(f"  unsafe    shards outside the folder: {', '.join(index.outside)} "
                     "(the loader reads files this folder does not hold)")  # fmt: skip
    if index.missing:
        lines.append(f"  error     shards missing: {', '.join(index.missing)}")
    if index.unlisted:
        lines.append(f"  note: not in the index (judged all the same): {', '.join(index.unlisted)}")
    return lines


def _severity_style(severity: str) -> str:
    return "warning" if severity == "warning" else "fail"


def convert_text(result: ConvertResult) -> str:
    lines = [f"wrote {', '.join(result.outputs)}"]
    lines.append(
        f"{result.tensors} tensors written, {result.verified} read back identical "
        f"(dtype, shape, every byte), and the structure around them read back equal "
        f"(types, values, attributes, shared objects); {nbytes(result.bytes_written)}"
        + ("; tensors streamed one at a time" if result.streamed else "")
    )
    if result.aliases:
        pairs = ", ".join(f"{a} -> {c}" for a, c in list(result.aliases.items())[:5])
        lines.append(f"{len(result.aliases)} aliases stored once, recorded in metadata: {pairs}")
    if result.made_contiguous:
        lines.append(f"made contiguous: {', '.join(result.made_contiguous[:8])}")
    if result.copied_views:
        lines.append(f"overlapping views written as copies: {', '.join(result.copied_views[:8])}")
    if result.split:
        lines.append(f"stored as parts (--split): {', '.join(result.split)}")
    if result.extras:
        lines.append(f"non-tensor values kept as typed JSON: {', '.join(result.extras[:8])}")
    if result.dropped:
        lines.append(f"left out (--drop-non-tensor): {', '.join(result.dropped)}")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def scan_sarif(report: ScanReport) -> dict[str, Any]:
    results = []
    for f in report.files:
        if f.error and f.verdict == "error":
            results.append(_sarif_result("TWC006", f, f.error, None))
        for finding in f.findings:
            rule_id = _RULE_IDS[finding.rule]
            text = f"{finding.global_name or finding.rule}: {finding.reason}"
            if finding.call:
                text += f"; would call {finding.call}"
            text += f" ({finding.member}, byte {finding.offset})"
            results.append(_sarif_result(rule_id, f, text, finding))
    for index in report.indexes:
        results += _index_results(index)
    rules = [
        {
            "id": rule_id,
            "name": name,
            "shortDescription": {"text": text},
            "defaultConfiguration": {"level": level},
            "helpUri": f"{REPOSITORY}/blob/main/docs/ckpt.md",
        }
        for rule_id, (name, level, text) in SARIF_RULES.items()
    ]
    return sarif_log(rules, results)


def _index_results(index: IndexView) -> list[dict[str, Any]]:
    problems = [("TWC011", f"the index names a shard outside its folder: {shard}")
                for shard in index.outside]  # fmt: skip
    problems += [("TWC006", f"the index names a shard that is missing: {shard}")
                 for shard in index.missing]  # fmt: skip
    if index.error:
        problems.append(("TWC006", index.error))
    location = {"physicalLocation": {"artifactLocation": artifact_location(index.path)}}
    return [
        {"ruleId": rule_id, "level": SARIF_RULES[rule_id][1], "message": {"text": text},
         "locations": [location], "properties": {"index": True}}
        for rule_id, text in problems
    ]  # fmt: skip


def _sarif_result(rule_id: str, f: FileScan, text: str, finding: Any) -> dict[str, Any]:
    level = SARIF_RULES[rule_id][1]
    location: dict[str, Any] = {"artifactLocation": artifact_location(f.path)}
    props: dict[str, Any] = {"verdict": f.verdict, "format": f.format}
    if finding is not None:
        props.update(member=finding.member, opcodeOffset=finding.offset, severity=finding.severity)
        if finding.global_name:
            props["global"] = finding.global_name
        if finding.loaders:
            props["loaders"] = finding.loaders
    return {
        "ruleId": rule_id,
        "level": level,
        "message": {"text": text},
        "locations": [{"physicalLocation": location}],
        "properties": props,
    }
