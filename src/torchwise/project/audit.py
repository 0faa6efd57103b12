"""``torchwise project``: knowledge, then review, checkpoint scan, each model measured,
the training command run, and one merged report.

The phases run in order of cost and each is optional: the static knowledge
(no user code), ``review`` over the code, ``ckpt scan`` (and ``ckpt inspect``
of the files that scan safe) over the checkpoints, then, unless ``--no-import``,
each top-level module class that can be built is built in a worker process
(:mod:`torchwise.isolation`) and inspected and doctored there, and the
project's training command runs for a few steps under ``torchwise run``
(:mod:`torchwise.project.execution`; ``--no-run`` skips it). Last,
:mod:`torchwise.project.merged` puts every finding in the reviewer's order.
Nothing is written into the project: no review cache, no ``__pycache__``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from torchwise import __version__
from torchwise.deps import TORCH_INSTALL_HINT, install_hint
from torchwise.errors import TorchwiseError
from torchwise.isolation import run_isolated
from torchwise.project import evidence
from torchwise.project.environment import distribution, torch_importable
from torchwise.project.execution import run_training
from torchwise.project.knowledge import ProjectScan, scan_project
from torchwise.project.measure import ModelTask, audit_model
from torchwise.project.merged import merge
from torchwise.project.schema import (
    CheckpointEntry,
    ModelAudit,
    ModuleClass,
    ProjectReport,
    ReviewSummary,
)
from torchwise.project.workers import WORKER_PRELOAD

#: Doctor's quick set for an audit: the checks that cost one or a few forwards. The
#: full set adds bit-exact determinism, bf16 drift and torch.export/compile.
QUICK_CHECKS = (
    "grad-flow", "batch-independence", "eval-determinism", "train-eval-gap", "init-loss",
    "overfit-batch", "param-update", "nan-inf", "grad-scale", "dead-units", "device-consistency",
)  # fmt: skip
MAX_CHECKPOINTS = 200

Step = Callable[[str], None]


@dataclass(frozen=True)
class AuditOptions:
    """What ``torchwise project`` runs; the defaults are the command's."""

    import_models: bool = True
    review: bool = True
    checkpoints: bool = True
    doctor: str = "quick"  # quick | full | off | a comma-separated list of check ids
    max_models: int = 8
    model_timeout: float = 300.0
    max_findings: int = 500
    probe_devices: bool = True
    #: run the project's training command for a few steps (needs import_models)
    run_training: bool = True
    run_timeout: float = 300.0

    def doctor_checks(self) -> tuple[str, ...] | None:
        """None: no doctor; (): every check; else the ids to run."""
        named: dict[str, tuple[str, ...] | None] = {"off": None, "full": (), "quick": QUICK_CHECKS}
        if self.doctor in named:
            return named[self.doctor]
        return tuple(c.strip() for c in self.doctor.split(",") if c.strip())


@contextmanager
def _timed(timings: dict[str, float], phase: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[phase] = round(time.perf_counter() - start, 3)


def models_to_build(scan: ProjectScan, limit: int) -> tuple[list[ModuleClass], list[str]]:
    """The top-level buildable classes, configured first; and notes on those left out."""
    notes = []
    chosen = []
    modules = sorted(
        scan.knowledge.modules,
        key=lambda m: (m.build.how != "configured", m.path.count("/"), m.path, m.line),
    )
    for module in modules:
        if not module.build.buildable or not (module.top_level or module.build.how == "configured"):
            continue
        risk = scan.facts[module.path].import_risk if module.path in scan.facts else None
        if risk and module.build.how != "configured":
            notes.append(
                f"{module.name} not built: importing {module.path} would run code ({risk})"
            )
            continue
        chosen.append(module)
    if len(chosen) > limit:
        notes.append(f"built the first {limit} of {len(chosen)} models (--max-models)")
        chosen = chosen[:limit]
    return chosen, notes


def run_review(scan: ProjectScan, max_findings: int) -> ReviewSummary:
    from torchwise.config import ToolConfig, load_config
    from torchwise.review import build_settings, review_paths

    root = Path(scan.knowledge.root)
    pyproject = root / "pyproject.toml"
    config = load_config(path=pyproject) if pyproject.is_file() else ToolConfig()
    report = review_paths([root], build_settings(config), cache_dir=None)
    return evidence.review_summary(report, root, max_findings=max_findings)


def run_checkpoints(scan: ProjectScan, step: Step) -> tuple[list[CheckpointEntry], list[str]]:
    from torchwise import ckpt

    root = Path(scan.knowledge.root)
    entries, notes = [], []
    paths = scan.files.checkpoints
    if len(paths) > MAX_CHECKPOINTS:
        notes.append(f"scanned the first {MAX_CHECKPOINTS} of {len(paths)} checkpoint files")
        paths = paths[:MAX_CHECKPOINTS]
    for relative in paths:
        step(f"scanning {relative}")
        try:
            file_scan = ckpt.scan([root / relative]).files[0]
        except TorchwiseError as exc:
            notes.append(f"{relative}: {exc}")
            continue
        contents = None
        if file_scan.verdict in ("safe", "warning"):
            try:
                contents = ckpt.inspect(root / relative)
            except TorchwiseError:
                contents = None  # the verdict stands; the contents are just not listed
        entries.append(evidence.checkpoint_entry(file_scan, contents, root))
    return entries, notes


def audit_project(
    root: Path,
    options: AuditOptions = AuditOptions(),
    *,
    step: Step | None = None,
    plan: Callable[[int], None] | None = None,
) -> ProjectReport:
    """Audit the project at ``root``. ``plan(n)`` is told the number of steps once known,
    ``step(label)`` is called as each begins (for a progress bar)."""
    step = step or (lambda label: None)
    _check_doctor_ids(options)
    timings: dict[str, float] = {}
    with _timed(timings, "knowledge"):
        scan = scan_project(root, probe_devices=options.probe_devices)
    if not scan.files.python and not scan.files.notebooks:
        # as review: an audit of no code is a wrong path, not a clean project
        hint = "give the project's root (its .py and .ipynb files)"
        if scan.files.checkpoints:
            hint += "; for its checkpoints alone: torchwise ckpt scan"
        raise TorchwiseError(f"no Python files found in {root}", hint=hint)
    report = ProjectReport(torchwise_version=__version__, knowledge=scan.knowledge)
    build = options.import_models and torch_importable()
    chosen, notes = models_to_build(scan, options.max_models) if build else ([], [])
    report.notes.extend(notes)
    if options.import_models and not build:
        report.notes.append(
            "models not built: PyTorch is not installed where torchwise runs "
            f"({install_hint('torch')}; {TORCH_INSTALL_HINT})"
        )
    if plan is not None:
        plan(
            int(options.review)
            + len(scan.files.checkpoints) * options.checkpoints
            + len(chosen)
            + int(build and options.run_training)
        )
    if options.review:
        step("reviewing the code")
        with _timed(timings, "review"):
            report.review = run_review(scan, options.max_findings)
    if options.checkpoints and scan.files.checkpoints:
        with _timed(timings, "checkpoints"):
            report.checkpoints, notes = run_checkpoints(scan, step)
        report.notes.extend(notes)
    if chosen:
        with _timed(timings, "models"):
            for module in chosen:
                step(f"building {module.name}")
                audit = _audit_one(module, root.resolve(), options)
                record_outcome(module, audit)  # the knowledge says what was tried and how it went
                report.models.append(audit)
    elif not options.import_models:
        report.notes.append("models not built (--no-import): static audit only")
    if build and options.run_training:
        step("running the training command")
        with _timed(timings, "run"):
            report.run = run_training(root, scan.knowledge, options.run_timeout)
        if report.run is None:
            report.notes.append("no training command found to run")
    report.merged = merge(report)
    report.timings = timings
    return report


_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


def record_outcome(module: ModuleClass, audit: ModelAudit) -> None:
    """Turn ``module``'s build plan into a recipe that worked, or into what it needs.

    A plan read from the code is only a guess until it is tried: measured means the
    build and its inputs worked; anything else says what building it needs and how.
    """
    plan = module.build
    if audit.measure is not None:
        plan.status = "built"
        plan.inputs, plan.inputs_source = audit.inputs, audit.inputs_source  # type: ignore[assignment]
        return
    plan.status = "failed"
    plan.error = audit.error
    plan.needs = needs_for(module, audit.error or "")


def needs_for(module: ModuleClass, error: str) -> str:
    """What building ``module`` needs, given the error its build ended with, and how."""
    configure = f"[tool.torchwise.models.{module.name.lower()}] in pyproject.toml"
    missing = _MISSING_MODULE.search(error)
    if missing:
        package = distribution(missing.group(1).split(".")[0])  # skimage is scikit-image
        return f"{package}, which is not installed where torchwise runs: pip install {package}"
    if "took longer than" in error:
        return f"more time or a smaller size: --model-timeout, or a small config in {configure}"
    if "infer" in error or "forward takes" in error or "input" in error.lower():
        return f"its inputs: give them as `inputs` in {configure}"
    if "arguments" in error or "TypeError" in error:
        return f"constructor arguments: give them as `init-kwargs` (or a factory) in {configure}"
    return f"a build that works: configure it in {configure} (target, init-kwargs, inputs)"


def _check_doctor_ids(options: AuditOptions) -> None:
    wanted = options.doctor_checks()
    if not wanted or options.doctor == "quick" or not options.import_models:
        return
    if not torch_importable():
        return  # no model is built, so no check runs
    from torchwise.doctor import CHECK_IDS

    unknown = [c for c in wanted if c not in CHECK_IDS]
    if unknown:
        raise TorchwiseError(
            f"unknown doctor check id(s): {', '.join(unknown)}",
            hint=f"use quick, full, off or ids from: {', '.join(CHECK_IDS)}",
        )


def _audit_one(module: ModuleClass, root: Path, options: AuditOptions) -> ModelAudit:
    task = ModelTask(
        root=str(root),
        module=module,
        doctor_checks=options.doctor_checks(),
    )
    started = time.perf_counter()
    try:
        result: ModelAudit = run_isolated(
            audit_model,
            (task,),
            cwd=root,
            timeout=options.model_timeout,
            what=f"building and checking {module.name}",
            preload=WORKER_PRELOAD,
        )
        return result
    except TorchwiseError as exc:
        message = str(exc).splitlines()[0]
        partial = getattr(exc, "partial", None)
        if isinstance(partial, ModelAudit):  # what finished (inspect, some doctor checks) is kept
            partial.error = message
            partial.seconds = round(time.perf_counter() - started, 2)
            return partial
        return ModelAudit(
            name=module.name,
            path=module.path,
            target=module.build.target or module.path,
            error=message,
            seconds=round(time.perf_counter() - started, 2),
        )
