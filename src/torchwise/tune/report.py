"""The tune report: one data model, rendered as text, JSON, Markdown or HTML.

Recommendations come first, in the order the greedy search accepted them (the
largest measured gain first), each with the exact code change against the
canonical loop and its evidence: medians and IQRs of both arms, the paired time
ratio with its confidence interval, the number of rounds, and the correctness
check. Everything measured but not recommended follows, then what could not be
tried here and why. The JSON layout is documented in docs/tune.md and versioned
by ``SCHEMA``.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from torchwise.tune.knobs import MEMORY, Knob
from torchwise.tune.loop import Loop, apply, diff
from torchwise.tune.render import FORMATS, render
from torchwise.tune.stats import Comparison, format_confidence
from torchwise.tune.trials import TrialStatus

if TYPE_CHECKING:
    from torchwise.tune.batch_size import BatchSizeResult
    from torchwise.tune.loader_scan import LoaderScan
    from torchwise.tune.lr_range import LRResult
    from torchwise.tune.memory import StepMemory
    from torchwise.tune.profile import Profile
    from torchwise.tune.script import TrainScript
    from torchwise.tune.session import ArmResult, SessionConfig
    from torchwise.tune.trials import SearchResult, Trial

SCHEMA = "torchwise.tune/1"
__all__ = ["FORMATS", "SCHEMA", "Environment", "TuneReport"]


def _load() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass
class Environment:
    """Where the numbers were measured: a busy machine is part of the evidence."""

    torch_version: str
    device: str
    device_name: str
    cores: int
    threads: int
    load_start: float | None
    load_end: float | None = None

    @classmethod
    def capture(cls, device: torch.device) -> Environment:
        load = _load()
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()
        return cls(
            torch.__version__,
            str(device),
            name,
            os.cpu_count() or 1,
            torch.get_num_threads(),
            load[0] if load else None,
        )

    def finish(self) -> None:
        load = _load()
        self.load_end = load[0] if load else None

    @property
    def busy(self) -> bool:
        loads = [x for x in (self.load_start, self.load_end) if x is not None]
        return bool(loads) and max(loads) > self.cores

    def line(self) -> str:
        load = ""
        if self.load_start is not None:
            load = f"; load average {self.load_start:.1f}"
            if self.load_end is not None:
                load += f" -> {self.load_end:.1f}"
            if self.busy:
                load += f" on {self.cores} cores: a busy machine, timings are noisier"
        return (
            f"{self.device} ({self.device_name}), torch {self.torch_version}, {self.cores} cores, "
            f"{self.threads} threads{load}"
        )


def _arm_stats(result: ArmResult | None) -> dict[str, Any] | None:
    if result is None or not result.samples:
        return None
    low, high = result.iqr_s
    return {
        "median_s": result.median_s,
        "iqr_s": [low, high],
        "samples": len(result.samples),
        "steps_per_sample": result.steps_per_sample,
        "first_step_s": result.first_step_s,
        "times_s": result.times,
    }


def _comparison(c: Comparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "verdict": c.verdict.value,
        "ratio": c.ratio,
        "speedup": c.speedup,
        "ci_ratio": [c.ci_low, c.ci_high],
        "confidence": c.confidence,
        "p_value": c.p_value,
        "rounds": c.rounds,
        "min_effect": c.min_effect,
        "settled": c.settled,
        "reason": c.reason,
    }


def _memory(m: StepMemory | None) -> dict[str, Any] | None:
    if m is None:
        return None
    return {
        "resident_bytes": m.resident,
        "peak_bytes": m.peak,
        "source": m.source,
        "reserved_bytes": m.reserved,
        "rss_peak_bytes": m.rss_peak,
    }


@dataclass
class TuneReport:
    """Everything a tune run measured (see the module docstring)."""

    name: str
    environment: Environment
    workload: dict[str, Any]
    search: SearchResult
    skipped: list[tuple[Knob, str]]
    profile: Profile | None
    memory: StepMemory | None
    loader_scan: LoaderScan | None
    batch_size: BatchSizeResult | None
    lr: LRResult | None
    session: SessionConfig
    budget_s: float
    elapsed_s: float
    canonical: Loop
    #: the user's training script (--train-script), when the diffs are against it
    script: TrainScript | None = None

    # -- derived views ------------------------------------------------------------

    @property
    def trials(self) -> list[Trial]:
        return [t for stage in self.search.stages for t in stage.trials]

    def latest_trials(self) -> list[Trial]:
        """Each knob's last measurement (a knob measured in two stages appears once)."""
        latest: dict[str, Trial] = {}
        for trial in self.trials:
            latest[trial.knob.id] = trial
        return list(latest.values())

    @property
    def baseline(self) -> ArmResult | None:
        stage = self.search.stages[0] if self.search.stages else None
        return stage.session.baseline if stage is not None and stage.session else None

    @property
    def recommendations(self) -> list[Trial]:
        return list(self.search.accepted)

    def recommendation_diffs(self) -> list[str]:
        """Each accepted knob's diff, against the user's script or the canonical loop,
        with the earlier ones applied."""
        knobs = [t.knob for t in self.recommendations]
        if self.script is not None:
            return self.script.diffs(knobs, fallback=self.canonical)
        diffs, loop = [], self.canonical
        for knob in knobs:
            after = apply(loop, knob.edits)
            diffs.append(diff(loop, after, name="pattern.py"))
            loop = after
        return diffs

    def combined_diff(self) -> str:
        knobs = [t.knob for t in self.recommendations]
        if self.script is not None:
            return self.script.combined_diff(knobs, fallback=self.canonical)
        edits = [e for k in knobs for e in k.edits]
        return diff(self.canonical, apply(self.canonical, edits), name="pattern.py")

    def tradeoffs(self) -> list[Trial]:
        return [t for t in self.latest_trials() if t.knob.kind == MEMORY and not t.status.broken]

    def not_recommended(self) -> list[Trial]:
        """Speed knobs measured but not accepted (their last measurement), fastest first."""
        accepted = {t.knob.id for t in self.recommendations}
        rows = [
            t
            for t in self.latest_trials()
            if t.knob.kind != MEMORY and t.knob.id not in accepted and t.status.timed
        ]
        return sorted(rows, key=lambda t: t.comparison.ratio if t.comparison else math.inf)

    def broken(self) -> list[Trial]:
        return [t for t in self.latest_trials() if t.status.broken]

    def not_applicable(self) -> list[Trial]:
        return [t for t in self.latest_trials() if t.status is TrialStatus.NOT_APPLICABLE]

    # -- outputs --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        baseline = self.baseline
        diffs = self.recommendation_diffs()
        profile = self.profile
        combined = self.search.combined
        data: dict[str, Any] = _jsonable(
            {
                "schema": SCHEMA,
                "model": self.name,
                "environment": self.environment.__dict__ | {"busy": self.environment.busy},
                "workload": self.workload,
                "baseline": {
                    "step": _arm_stats(baseline),
                    "samples_per_s": self.throughput(baseline.median_s) if baseline else None,
                    "phases_s": profile.phases if profile else None,
                    "profiled_steps": profile.profiled_steps if profile else None,
                    "memory": _memory(self.memory),
                    "top_ops": [op.__dict__ for op in profile.top_ops] if profile else [],
                    "op_time": profile.time_column if profile else None,
                    "syncs": [s.__dict__ for s in profile.syncs] if profile else [],
                },
                "recommendations": [
                    self._trial_dict(t) | {"diff": d}
                    for t, d in zip(self.recommendations, diffs, strict=True)
                ],
                "combined": None
                if not self.recommendations
                else {
                    "knobs": [t.knob.id for t in self.recommendations],
                    "comparison": _comparison(combined),
                    "not_measured": self.search.combined_not_measured,
                    "diff": self.combined_diff(),
                },
                "diffs_against": str(self.script.path) if self.script is not None else "pattern",
                "trials": [self._trial_dict(t) for t in self.trials],
                "skipped": [{"knob": k.id, "title": k.title, "reason": r} for k, r in self.skipped],
                "loader": self._loader_dict(),
                "batch_size": self.batch_size.to_dict() if self.batch_size else None,
                "lr": self.lr.to_dict() if self.lr else None,
                "method": {
                    "test": "paired Wilcoxon signed-rank; Hodges-Lehmann time ratio",
                    "confidence": self.session.confidence,
                    "look_confidence": format_confidence(self._look_confidence()),
                    "min_effect": self.session.min_effect,
                    "budget_s": self.budget_s,
                    "train_mode": self.search.check_mode.startswith("train"),
                    "check_mode": self.search.check_mode,
                },
                "elapsed_s": self.elapsed_s,
            }
        )
        return data

    def _look_confidence(self) -> float:
        from torchwise.tune.session import look_confidence

        return look_confidence(self.session)

    def throughput(self, seconds: float) -> float | None:
        size = self.workload.get("batch_size")
        return size / seconds if size and seconds > 0 else None

    def _trial_dict(self, t: Trial) -> dict[str, Any]:
        return {
            "knob": t.knob.id,
            "title": t.knob.title,
            "kind": t.knob.kind,
            "stage": t.stage,
            "on_top_of": list(t.on_top_of),
            "status": t.status.value,
            "accepted": t.accepted,
            "reopened": t.reopened,
            "why": t.knob.why,
            "error": t.error,
            "not_applicable": t.not_applicable,
            "first_step_s": t.first_step_s,
            "check": None if t.check is None else t.check.to_dict(),
            "step": _arm_stats(t.result),
            "baseline_step": _arm_stats(t.baseline),
            "comparison": _comparison(t.comparison),
            "memory": _memory(t.memory),
            "model_change": t.knob.model_change or None,
        }

    def _loader_dict(self) -> dict[str, Any] | None:
        scan = self.loader_scan
        if scan is None:
            return None
        rows = []
        for settings, result in scan.results.items():
            rows.append(
                {
                    "settings": settings.kwargs(),
                    "seconds_per_batch": result.median_s,
                    "comparison": _comparison(result.comparison) if settings != scan.user else None,
                }
            )
        return {
            "user": scan.user.kwargs(),
            "best": scan.best.kwargs(),
            "speedup": scan.speedup,
            "configs": rows,
            "input_bound": self.input_bound(),
        }

    def input_bound(self) -> dict[str, Any] | None:
        """Loader time per batch against the step's compute, when both were measured."""
        scan, profile = self.loader_scan, self.profile
        if scan is None or profile is None:
            return None
        compute = sum(v for k, v in profile.phases.items() if k != "data")
        loading = scan.seconds_per_batch(scan.user)
        best = scan.seconds_per_batch(scan.best)
        return {
            "loader_s_per_batch": loading,
            "best_loader_s_per_batch": best,
            "compute_s_per_step": compute,
            "input_bound": loading > compute,
            "input_bound_with_best": best > compute,
            "waiting_share": loading / (loading + compute) if loading + compute > 0 else 0.0,
        }

    def render(self, fmt: str = "text") -> str:
        """The report as ``text``, ``json``, ``markdown`` or ``html`` (see
        :mod:`torchwise.tune.render`)."""
        return render(self, fmt)


def _jsonable(value: Any) -> Any:
    """Strict JSON: tuples -> lists, inf/nan -> null, small floats rounded to 6 digits."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)
