"""The result of a run: findings and what ran, in review's formats and exit codes.

Ranks report separately; :func:`merge` makes one list of them, one finding per
code and place with the ranks that saw it, and adds the cross-rank findings.
The exit code is 1 when a warning or an error was found, 0 otherwise (hints,
severity ``info``, are shown but do not fail a run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchwise.errors import ExitCode
from torchwise.findings import Finding, Severity, finding_from_dict
from torchwise.findings_output import Document, render
from torchwise.run.catalog import all_checks, describe
from torchwise.run.options import RunOptions
from torchwise.run.sites import display


@dataclass
class RunReport:
    """What ``torchwise run`` found, and how far the script got."""

    target: str  # "train.py" or "-m package.module"
    args: tuple[str, ...]
    options: RunOptions
    findings: list[Finding]
    ranks: list[dict[str, Any]] = field(default_factory=list)
    #: "" when the script finished or the budget ended it; else why it was stopped
    stopped_by: str = ""
    output: str = ""  # the script's stdout and stderr when captured
    wall_seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        serious = any(f.severity is not Severity.INFO for f in self.findings)
        return ExitCode.FINDINGS if serious else ExitCode.OK

    @property
    def steps(self) -> int:
        return max((int(rank.get("steps", 0)) for rank in self.ranks), default=0)

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def summary(self) -> dict[str, object]:
        first = self.ranks[0] if self.ranks else {}
        # with torch.multiprocessing.spawn the training happens in the spawned processes
        spawned = [rank for rank in self.ranks if rank.get("spawned")]
        worker = spawned[0] if spawned else first
        return {
            "target": self.target,
            "args": list(self.args),
            "ranks": len(spawned) or len(self.ranks) or self.options.nproc,
            "spawned": bool(spawned),
            "steps": self.steps,
            "training_passes": worker.get("training_passes", 0),
            "evaluation_passes": worker.get("evaluation_passes", 0),
            "exit_status": first.get("exit_status"),
            "stopped_by": self.stopped_by
            or first.get("stopped_by", "")
            or worker.get("stopped_by", ""),
            "median_step_seconds": worker.get("median_step_seconds"),
            "wall_seconds": round(self.wall_seconds, 3),
            "as_cuda": self.options.as_cuda,
            "notes": sorted({n for rank in self.ranks for n in rank.get("notes", [])}),
        }

    def describe_run(self) -> str:
        """One line: what ran and how far (the text report's first line)."""
        s = self.summary()
        ranks = f" on {s['ranks']} ranks" if int(str(s["ranks"])) > 1 else ""
        if s["spawned"]:
            ranks = f" ({s['ranks']} spawned process{'es' * (int(str(s['ranks'])) != 1)})"
        cuda = " with a simulated GPU" if self.options.as_cuda else ""
        stopped = s["stopped_by"]
        how = f"stopped after {stopped}" if stopped else "ran to its end"
        if s["exit_status"] not in (0, None) and not stopped:
            how = f"ended with status {s['exit_status']}"
        steps = int(str(s["steps"]))
        training, evaluation = int(str(s["training_passes"])), int(str(s["evaluation_passes"]))
        return (
            f"Ran {self.target}{ranks}{cuda}: {steps} optimizer step{'s' * (steps != 1)}, "
            f"{training} training and {evaluation} evaluation pass"
            f"{'es' * (training + evaluation != 1 or evaluation != 1)}; "
            f"{how} ({self.wall_seconds:.1f} s)."
        )

    def render(self, fmt: str, *, color: bool = False) -> str:
        document = Document(
            findings=[_displayed(f) for f in self.findings],
            describe=describe,
            codes=[check.info() for check in all_checks().values()],
            extra={"run": self.summary()},
            scope=self.target,
        )
        if fmt != "text":
            return render(document, fmt)
        notes = [f"note: {n}" for n in self.summary()["notes"]]  # type: ignore[attr-defined]
        return "\n".join([self.describe_run(), *notes, "", render(document, "text", color=color)])


def _displayed(finding: Finding) -> Finding:
    """The finding with its path relative to the working directory."""
    from dataclasses import replace

    return replace(finding, path=display(finding.path))


def merge(results: list[dict[str, Any]]) -> list[Finding]:
    """One finding per code and place across ranks, with the ranks that saw it."""
    merged: dict[tuple[str, str, int], tuple[Finding, list[int]]] = {}
    for result in sorted(results, key=lambda r: int(r.get("rank", 0))):
        for data in result.get("findings", []):
            finding = finding_from_dict(data)
            key = (finding.code, finding.path, finding.line)
            if key in merged:
                merged[key][1].append(int(result.get("rank", 0)))
            else:
                merged[key] = (finding, [int(result.get("rank", 0))])
    findings = []
    for finding, ranks in merged.values():
        if len(results) > 1:
            finding.data["ranks"] = ", ".join(str(r) for r in ranks)
        findings.append(finding)
    return sorted(without_echoed_warnings(findings), key=lambda f: f.sort_key())


def without_echoed_warnings(findings: list[Finding]) -> list[Finding]:
    """A library's warning (TWR002) at a line where a check reports: the check
    says it with the evidence (torch's scheduler-order warning and TWR105)."""
    explained = {(f.path, f.line) for f in findings if f.code != "TWR002"}
    return [f for f in findings if f.code != "TWR002" or (f.path, f.line) not in explained]
