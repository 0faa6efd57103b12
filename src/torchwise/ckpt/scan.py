"""``torchwise ckpt scan``: is this checkpoint safe to load? An allowlist, with evidence.

The file is read along torch.load's own route (:mod:`torchwise.ckpt.loaders.torch_load`)
and every pickle in it, loaded by torch or merely present, is judged:

- every global it imports, by :mod:`torchwise.ckpt.policy` (weights_only's allowlist);
- every anomaly the machine recorded (a computed import, BUILD on a class, ...);
- every structural trick of the container (zip member confusion, tar links, frames);
- every budget it exhausted: **too large to vet** is unsafe, because torch would
  have gone on unpickling what the scan did not see.

Verdicts: ``unsafe`` (exit 1) whenever any of that is found, even in a file torch
would then fail on; ``error`` (exit 2) when nothing unsafe was found and torch.load
fails on the file (corrupt, truncated, not a checkpoint); ``warning`` for
known-benign non-tensor objects; ``safe`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torchwise.ckpt.budgets import DEFAULT_BUDGETS, Budgets
from torchwise.ckpt.evidence import caller_index, numpy_object_scalars, render
from torchwise.ckpt.formats.container import Container, PickleMember
from torchwise.ckpt.loaders.torch_load import read_container
from torchwise.ckpt.policy import Verdict, classify
from torchwise.errors import ExitCode, TorchwiseError

#: suffixes a directory scan picks up
CHECKPOINT_SUFFIXES = frozenset(
    {".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".safetensors", ".tar", ".model",
     ".pyt", ".pt2", ".joblib", ".pte"}
)  # fmt: skip
_MAX_PER_GLOBAL = 5
_TRICK_RULES = {
    "too-large": "too-large-to-vet",
    "torchscript": "torchscript-code",
    "native-code": "native-code",
    "bad-checksum": "archive-checksum",
}
_SEVERITY_RULE = {
    Verdict.WARNING: ("warning", "non-tensor-object"),
    Verdict.UNSAFE: ("unsafe", "unsafe-global"),
    Verdict.DANGEROUS: ("dangerous", "dangerous-global"),
}


@dataclass
class Finding:
    #: dangerous, unsafe or warning
    severity: str
    #: dangerous-global, unsafe-global, non-tensor-object, malformed-pickle, torchscript-code,
    #: archive-confusion, too-large-to-vet, native-code
    rule: str
    global_name: str | None
    reason: str
    member: str
    offset: int
    #: the call the unpickler would make, e.g. ``posix.system('touch /tmp/x')``
    call: str | None = None


@dataclass
class FileScan:
    path: str
    format: str
    #: safe, warning, unsafe or error
    verdict: str
    findings: list[Finding] = field(default_factory=list)
    #: every global referenced, with how often
    globals: dict[str, int] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class ScanReport:
    files: list[FileScan]

    @property
    def exit_code(self) -> ExitCode:
        verdicts = {f.verdict for f in self.files}
        if "unsafe" in verdicts:
            return ExitCode.FINDINGS
        if "error" in verdicts:
            return ExitCode.ERROR
        return ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {"files": [asdict(f) for f in self.files], "exit_code": int(self.exit_code)}


def scan(
    paths: str | Path | Sequence[str | Path],
    allow: Iterable[str] = (),
    budgets: Budgets = DEFAULT_BUDGETS,
    progress: Callable[[Path], None] | None = None,
) -> ScanReport:
    """Scan files or directories; ``allow`` names globals (``module.Name``) to accept.

    ``progress`` is called with each file before it is scanned (for a progress bar).
    """
    targets = [paths] if isinstance(paths, (str, Path)) else list(paths)
    allowed = frozenset(allow)
    files: list[FileScan] = []
    for path in expand(targets):
        if progress is not None:
            progress(path)
        files.append(scan_file(path, allowed, budgets))
    return ScanReport(files)


def expand(targets: Sequence[str | Path]) -> list[Path]:
    """Files to scan: each target itself, or the checkpoint files under a directory."""
    found: list[Path] = []
    for target in map(Path, targets):
        if not target.exists():
            raise TorchwiseError(f"{target}: no such file or directory")
        if not target.is_dir() or any(target.glob("*.index.json")):
            found.append(target)
            continue
        inside = sorted(
            p for p in target.rglob("*") if p.is_file() and p.suffix.lower() in CHECKPOINT_SUFFIXES
        )
        if not inside:
            raise TorchwiseError(
                f"{target}: no checkpoint files (*{', *'.join(sorted(CHECKPOINT_SUFFIXES))})",
                hint="pass the file itself if it has another extension",
            )
        found += inside
    return found


def scan_file(
    path: Path, allowed: frozenset[str] = frozenset(), budgets: Budgets = DEFAULT_BUDGETS
) -> FileScan:
    try:
        container = read_container(path, budgets, probe_storages=True)
    except TorchwiseError as exc:
        return FileScan(str(path), "unknown", "error", error=exc.message)
    except OSError as exc:
        return FileScan(str(path), "unknown", "error", error=f"cannot read it ({exc.strerror})")
    result = FileScan(str(path), container.format, "safe")
    for part in [container, *container.children]:
        _judge_container(part, result, allowed)
    severities = {f.severity for f in result.findings}
    if severities & {"dangerous", "unsafe"}:
        result.verdict = "unsafe"  # even when torch would then fail: the payload runs first
    elif result.error is not None:
        result.verdict = "error"
    elif "warning" in severities:
        result.verdict = "warning"
    return result


def _judge_container(container: Container, out: FileScan, allowed: frozenset[str]) -> None:
    for trick in container.tricks:
        rule = _TRICK_RULES.get(trick.kind, "archive-confusion")
        out.findings.append(
            Finding(trick.severity, rule, None, trick.message, trick.where, trick.offset)
        )
    for member in container.pickles:
        out.members.append(member.name)
        _judge_pickle(member, out, allowed)
    if container.failure and out.error is None:
        out.error = container.failure
    out.notes += [n for n in container.notes if n not in out.notes]


def _judge_pickle(member: PickleMember, out: FileScan, allowed: frozenset[str]) -> None:
    pickle = member.result
    callers = caller_index(pickle.calls)
    per_global: dict[str, int] = {}
    for glob in pickle.globals:
        name = glob.qualname
        out.globals[name] = out.globals.get(name, 0) + 1
        verdict = classify(name)
        if verdict.note and verdict.note not in out.notes:
            out.notes.append(verdict.note)
        if verdict.verdict is Verdict.SAFE or name in allowed:
            continue
        per_global[name] = per_global.get(name, 0) + 1
        if per_global[name] > _MAX_PER_GLOBAL:
            continue
        severity, rule = _SEVERITY_RULE[verdict.verdict]
        call = callers.get(id(glob))
        out.findings.append(
            Finding(
                severity,
                rule,
                name,
                verdict.reason,
                member.name,
                glob.offset,
                render(call) if call is not None else None,
            )
        )
    for anomaly in pickle.anomalies:
        out.findings.append(
            Finding(
                "unsafe",
                "malformed-pickle",
                None,
                f"{anomaly.message}: no pickler emits this, and the scan cannot vet it",
                member.name,
                anomaly.offset,
            )
        )
    for call in numpy_object_scalars(pickle.calls):
        out.findings.append(
            Finding(
                "unsafe",
                "malformed-pickle",
                "numpy.core.multiarray.scalar",
                "a NumPy scalar of object dtype: older NumPy reads a raw object pointer from "
                "the pickle's bytes",
                member.name,
                call.offset,
                render(call),
            )
        )
    _judge_stops(member, out)


def _judge_stops(member: PickleMember, out: FileScan) -> None:
    pickle = member.result
    stop = pickle.stop
    if stop is not None and stop.kind == "budget":
        out.findings.append(
            Finding(
                "unsafe",
                "too-large-to-vet",
                None,
                f"{stop.message}; torch would go on unpickling what the scan did not see "
                "(raise the limit with the --max-* flags to vet it)",
                member.name,
                stop.offset,
            )
        )
        return
    if not member.loaded or out.error is not None:
        return
    if stop is not None:
        out.error = f"{member.name}: {stop.message} at byte {stop.offset} (torch.load fails there)"
    elif pickle.torch_stop is not None:
        torch_stop = pickle.torch_stop
        out.error = (
            f"{member.name}: {torch_stop.message} at byte {torch_stop.offset} "
            "(torch.load fails there)"
        )
