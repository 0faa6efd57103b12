"""``torchwise ckpt scan``: could loading this checkpoint run code? Per loader, with evidence.

Each file is read along the route of every loader a user could point at it
(:mod:`torchwise.ckpt.loaders.routes`: ``torch.load``, ``torch.jit.load``,
``numpy.load(allow_pickle=True)``, ``joblib.load``, ``pickle.load``,
safetensors), and everything any of them would unpickle or run is judged
(:mod:`torchwise.ckpt.judge`). Verdicts:

- ``unsafe`` (exit 1): some loader would run code the allowlist does not
  admit (a global, a call the scan cannot vet, TorchScript, a native library),
  the structure makes readers disagree, or a budget ended the vetting early;
  the finding names the loaders. A pickle no modelled loader reaches is judged
  too (fail-closed).
- ``error`` (exit 2): nothing unsafe, and no loader reads the file at all
  (corrupt, truncated, not a checkpoint).
- ``warning``: known-benign objects that are not tensors; ``safe`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torchwise.ckpt.budgets import DEFAULT_BUDGETS, Budgets
from torchwise.ckpt.folders import CHECKPOINT_SUFFIXES, IndexView, Targets, expand
from torchwise.ckpt.formats.container import Container
from torchwise.ckpt.judge import Finding, Judgement, judge_container
from torchwise.ckpt.loaders.names import ALL_LOADERS, TORCH_LOAD
from torchwise.ckpt.loaders.routes import read_container
from torchwise.ckpt.policy import check_allowed
from torchwise.errors import ExitCode, TorchwiseError

__all__ = [
    "CHECKPOINT_SUFFIXES",
    "FileScan",
    "Finding",
    "ScanReport",
    "expand",
    "scan",
    "scan_file",
    "scan_targets",
]


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
    #: why no loader reads the file (the first loader's reason), when the verdict is error
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    #: loader -> "reads", or why it refuses or fails
    loaders: dict[str, str] = field(default_factory=dict)


@dataclass
class ScanReport:
    files: list[FileScan]
    #: each sharded checkpoint's index, as its loader sees it
    indexes: list[IndexView] = field(default_factory=list)
    #: files in a folder that looked like a format but that no loader reads
    skipped: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        verdicts = {f.verdict for f in self.files}
        if "unsafe" in verdicts or any(i.outside for i in self.indexes):
            return ExitCode.FINDINGS
        if "error" in verdicts or any(i.error or i.missing for i in self.indexes):
            return ExitCode.ERROR
        return ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "files": [asdict(f) for f in self.files],
            "indexes": [asdict(i) for i in self.indexes],
            "skipped": self.skipped,
            "exit_code": int(self.exit_code),
        }


def scan(
    paths: str | Path | Sequence[str | Path],
    allow: Iterable[str] = (),
    budgets: Budgets = DEFAULT_BUDGETS,
    progress: Callable[[Path], None] | None = None,
) -> ScanReport:
    """Scan files or folders; ``allow`` names globals (``module.Name``) to accept.

    A folder is every checkpoint in it and each index file's view (see
    :mod:`torchwise.ckpt.folders`). ``progress`` is called with each file before it
    is scanned (for a progress bar).
    """
    allowed = check_allowed(allow)
    targets = expand([paths] if isinstance(paths, (str, Path)) else list(paths))
    return scan_targets(targets, allowed, budgets, progress)


def scan_targets(
    targets: Targets,
    allowed: frozenset[str] = frozenset(),
    budgets: Budgets = DEFAULT_BUDGETS,
    progress: Callable[[Path], None] | None = None,
) -> ScanReport:
    """Scan what :func:`torchwise.ckpt.folders.expand` found."""
    report = ScanReport([], targets.indexes)
    for path, sniffed in targets.files:
        if progress is not None:
            progress(path)
        result = scan_file(path, allowed, budgets)
        if sniffed and result.verdict == "error":
            report.skipped.append(str(path))  # looked like a format, but is not a checkpoint
        else:
            report.files.append(result)
    return report


def scan_file(
    path: Path, allowed: frozenset[str] = frozenset(), budgets: Budgets = DEFAULT_BUDGETS
) -> FileScan:
    """One file (or a sharded checkpoint's folder), judged on every loader's route."""
    try:
        container = read_container(path, budgets, probe_storages=True, every_loader=True)
    except TorchwiseError as exc:
        return FileScan(str(path), "unknown", "error", error=exc.message)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return FileScan(str(path), "unknown", "error", error=f"cannot read {path}: {reason}")
    judged = Judgement()
    parts = [container, *container.children]
    for part in parts:
        judge_container(part, judged, allowed)
    result = FileScan(
        str(path), container.format, "safe", judged.findings, judged.globals, judged.members,
        notes=judged.notes, loaders=_routes(parts),
    )  # fmt: skip
    if not any(state == "reads" for state in result.loaders.values()):
        result.error = _why_unreadable(result.loaders, container)
    elif result.loaders.get(TORCH_LOAD, "reads") != "reads":
        result.notes.append(f"torch.load fails: {result.loaders[TORCH_LOAD]}")
    severities = {f.severity for f in result.findings}
    if severities & {"dangerous", "unsafe"}:
        result.verdict = "unsafe"  # even when the loader would then fail: the payload runs first
    elif result.error is not None:
        result.verdict = "error"
    elif "warning" in severities:
        result.verdict = "warning"
    return result


def _routes(parts: list[Container]) -> dict[str, str]:
    """Per loader: "reads" when it reads every part, else the first part's failure."""
    states: dict[str, str] = {}
    for loader in ALL_LOADERS:
        failures = [p.routes[loader] for p in parts if loader in p.routes]
        if not failures:
            continue
        first = next((f for f in failures if f is not None), None)
        states[loader] = "reads" if first is None else first
    return states


def _why_unreadable(loaders: dict[str, str], container: Container) -> str:
    torch_reason = loaders.get(TORCH_LOAD) or container.failure or "no loader reads it"
    if len(loaders) < 2:
        return torch_reason
    return f"{torch_reason} (and no other loader reads it either)"
