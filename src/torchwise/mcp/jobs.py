"""What each MCP tool does, as plain functions run in a worker process.

The server (:mod:`torchwise.mcp.server`) confines every path and target to the
workspace first and then runs one of these in a child process with a time limit
(:mod:`torchwise.isolation`): a model's import, constructor and forward
are the user's code, and a review of a large tree can take long; either can be
stopped without taking the server down. Each function receives absolute,
already-checked paths and a ``progress(done, total, message)`` callback, and
returns one of the typed results of :mod:`torchwise.project.schema`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torchwise.deps import require_torch
from torchwise.errors import TorchwiseError
from torchwise.project import evidence
from torchwise.project.schema import (
    CheckpointContents,
    CheckpointScan,
    DocResult,
    DoctorSummary,
    FixPreview,
    GeneratedTest,
    ModelMeasure,
    ProjectKnowledge,
    ProjectReport,
    ReviewSummary,
    TestsCheck,
    TestsResult,
)

Progress = Callable[[float, "float | None", str], None]


def _settings(root: Path, select: Sequence[str] | None, ignore: Sequence[str]) -> Any:
    from torchwise.config import ToolConfig, load_config
    from torchwise.review import build_settings

    pyproject = root / "pyproject.toml"
    config = load_config(path=pyproject) if pyproject.is_file() else ToolConfig()
    return build_settings(config, select=list(select) if select else None, ignore=list(ignore))


def review(
    root: Path,
    paths: list[Path],
    select: list[str] | None,
    ignore: list[str],
    max_findings: int,
    progress: Progress,
) -> ReviewSummary:
    from torchwise.review import review_paths

    progress(0, 1, f"reviewing {len(paths)} path(s)")
    report = review_paths(paths, _settings(root, select, ignore), cache_dir=None)
    return evidence.review_summary(report, root, max_findings=max_findings)


def fix_preview(root: Path, paths: list[Path], unsafe: bool, progress: Progress) -> FixPreview:
    from torchwise.review import Applicability, FixMode, review_paths

    progress(0, 1, "computing fixes")
    minimum = Applicability.UNSAFE if unsafe else Applicability.SAFE
    report = review_paths(
        paths, _settings(root, None, ()), fix=FixMode(minimum=minimum, write=False), cache_dir=None
    )
    return evidence.fix_preview(report, root, unsafe=unsafe)


def _resolve(
    target: str,
    inputs: list[str],
    init_kwargs: dict[str, Any] | None,
    config: Path | None,
    device: str,
) -> Any:
    import json

    from torchwise.isolation import import_from
    from torchwise.target import TargetRequest

    import_from(Path.cwd())  # the worker runs in the workspace root
    init = None if init_kwargs is None else json.dumps(init_kwargs)
    return TargetRequest(target, tuple(inputs), init, config_start=config).resolve(device=device)


def inspect_model(
    target: str,
    inputs: list[str],
    init_kwargs: dict[str, Any] | None,
    config: Path | None,
    device: str,
    depth: int,
    progress: Progress,
) -> ModelMeasure:
    require_torch("the MCP tool inspect_model")
    from torchwise.model import summarize

    progress(0, 2, f"building {target}")
    resolved = _resolve(target, inputs, init_kwargs, config, device)
    progress(1, 2, "measuring")
    summary = summarize(
        resolved.model, resolved.args, resolved.kwargs, device=device, name=resolved.name
    )
    return evidence.model_measure(summary, depth=depth)


def diagnose_model(
    target: str,
    inputs: list[str],
    init_kwargs: dict[str, Any] | None,
    config: Path | None,
    checks: list[str] | None,
    causal_dim: int | None,
    loss: str,
    progress: Progress,
) -> DoctorSummary:
    """Doctor as `torchwise doctor` runs it (the same seed, batch and options); each
    finished check is a progress step."""
    require_torch("the MCP tool diagnose_model")
    import json

    from torchwise.doctor import prepare_diagnosis
    from torchwise.isolation import import_from
    from torchwise.target import TargetRequest

    import_from(Path.cwd())  # the worker runs in the workspace root
    init = None if init_kwargs is None else json.dumps(init_kwargs)
    request = TargetRequest(target, tuple(inputs), init, config_start=config)
    progress(0, None, f"building {target}")
    diagnosis = prepare_diagnosis(request, checks or None, loss=loss, causal_dim=causal_dim)
    total = diagnosis.total + 1
    done = [0]

    def finished(result: Any) -> None:
        done[0] += 1
        progress(done[0], total, f"doctor check {result.id}: {result.status.value}")

    return evidence.doctor_summary(diagnosis.run(on_result=finished))


def document_model(
    root: Path,
    target: str,
    inputs: list[str],
    init_kwargs: dict[str, Any] | None,
    config: Path | None,
    mode: str,
    progress: Progress,
) -> DocResult:
    """``torchwise doc``; ``mode="write"`` only after checking the class's file is ours."""
    require_torch("the MCP tool document_model")
    import json

    from torchwise.errors import ExitCode

    kwargs_json = None if init_kwargs is None else json.dumps(init_kwargs)
    before: bytes | None = None
    source: Path | None = None
    if mode == "write":
        progress(0, 2, f"locating the source of {target}")
        source = _resolve(target, inputs, init_kwargs, config, "meta").source_file
        if source is None or not _inside(source, root):
            raise TorchwiseError(
                f"{target}'s class is not defined in a workspace file ({source}); not writing"
            )
        before = source.read_bytes()
    progress(1, 2, f"measuring and documenting {target}")
    from torchwise.doc import run_doc
    from torchwise.target import TargetRequest

    request = TargetRequest(target, tuple(inputs), kwargs_json, config_start=config)
    code, out, err = run_doc(request, action=None if mode == "print" else mode)
    stale = None
    if mode == "check":
        stale = code == ExitCode.FINDINGS
    elif mode == "diff":
        stale = bool(out.strip())
    written = source is not None and before is not None and source.read_bytes() != before
    return DocResult(
        target=target,
        mode=mode,  # type: ignore[arg-type]
        stale=stale,
        written=written,
        output=out,
        messages=[line for line in err.splitlines() if line.strip()],
    )


def _inside(path: Path, root: Path) -> bool:
    resolved = path.resolve()
    return resolved == root or root in resolved.parents


def scan_checkpoint(root: Path, path: Path, progress: Progress) -> CheckpointScan:
    from torchwise import ckpt

    progress(0, 1, f"scanning {path.name}")
    return evidence.checkpoint_scan(ckpt.scan([path]), root)


def inspect_checkpoint(
    root: Path, path: Path, limit: int, progress: Progress
) -> CheckpointContents:
    from torchwise import ckpt

    progress(0, 1, f"reading {path.name}")
    return evidence.checkpoint_contents(ckpt.inspect(path), root, limit=limit)


def audit_project(
    root: Path, run: bool, doctor: str, max_models: int, budget: float, progress: Progress
) -> ProjectReport:
    from torchwise.project import AuditOptions
    from torchwise.project import audit_project as audit

    options = AuditOptions(
        doctor=doctor,
        max_models=max_models,
        run_training=run,
        run_timeout=max(30.0, budget / 2),
        model_timeout=max(30.0, budget / 4),
    )
    done = 0

    def step(label: str) -> None:
        nonlocal done
        progress(done, None, label)
        done += 1

    return audit(root, options, step=step)


def project_knowledge(root: Path, progress: Progress) -> ProjectKnowledge:
    from torchwise.project import gather_knowledge

    progress(0, 1, "reading the project")
    return gather_knowledge(root)


def write_tests(
    root: Path,
    target: str,
    inputs: list[str],
    init_kwargs: dict[str, Any] | None,
    config: Path | None,
    checks: list[str] | None,
    output: Path | None,
    mode: str,
    force: bool,
    progress: Progress,
) -> TestsResult:
    """``torchwise tests``: generate (``mode="generate"``), compare with the file at
    ``output`` (``"check"``) or write it there (``"write"``; ``output`` is a
    workspace path, checked by the server)."""
    require_torch("the MCP tool write_tests")
    from torchwise.isolation import import_from
    from torchwise.testgen import write_tests as generate_tests

    import_from(root)
    progress(0, 1, f"generating and running tests for {target}")
    result = generate_tests(
        target,
        inputs=inputs,
        init_kwargs=init_kwargs,
        config_start=config,
        output=output,
        force=force,
        check=mode == "check",
        checks=checks,
    )
    path = result.path.resolve()
    return TestsResult(
        target=result.target,
        path=str(path.relative_to(root)) if _inside(path, root) else str(path),
        status=result.status,
        command=result.command,
        text=result.text,
        tests=[_generated_test(test) for test in result.tests],
        left_out=[_generated_test(test) for test in result.left_out],
        checks=[
            TestsCheck(id=c.id, included=c.included, reason=c.reason, status=c.status)
            for c in result.checks
        ],
        notes=list(result.notes),
        warnings=list(result.warnings),
        diff=result.diff,
    )


def _generated_test(test: Any) -> GeneratedTest:
    return GeneratedTest(name=test.name, what=test.what, why=test.why)
