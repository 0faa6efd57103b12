"""Build one of the project's models, then inspect and doctor it (runs in a worker).

This is the only part of ``torchwise project`` that imports the project's code:
the model's own file (and what it imports), through
:func:`torchwise.target.resolve_target`, exactly as ``torchwise inspect`` would.
Each step's failure is recorded in the :class:`ModelAudit` rather than raised,
so a model that measures but fails a health check still reports its measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.isolation import import_from
from torchwise.project import evidence
from torchwise.project.schema import DoctorSummary, ModelAudit, ModuleClass
from torchwise.target import TargetRequest

Reporter = Callable[[float, "float | None", str], None]


@dataclass(frozen=True)
class ModelTask:
    root: str  # absolute project root
    module: ModuleClass
    doctor_checks: tuple[str, ...] | None  # None: no doctor; () : every check
    depth: int = 2


def request_of(module: ModuleClass, root: Path, inputs: Sequence[str] = ()) -> TargetRequest:
    """What builds a module by its build plan, fed ``inputs``."""
    plan = module.build
    given = tuple(inputs)
    if plan.how == "configured" and plan.target:
        return TargetRequest(plan.target, given, config_start=root)
    if plan.how in ("default", "factory") and plan.target:
        path, _, attr = plan.target.rpartition(":")
        return TargetRequest(f"{root / path}:{attr}", given)
    if plan.how == "config-class" and plan.build:
        return TargetRequest(str(root / module.path), given, build=plan.build)
    raise TorchwiseError(f"{module.name} cannot be built without arguments: {plan.reason}")


def _resolve(task: ModelTask, inputs: Sequence[str]) -> Any:
    return request_of(task.module, Path(task.root), inputs).resolve(device="cpu")


def _user_error(exc: BaseException, doing: str) -> str:
    if isinstance(exc, TorchwiseError):
        return str(exc).splitlines()[0]
    return str(UserCodeError.from_exception(exc, doing=doing)).splitlines()[0]


@dataclass
class _Built:
    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def _build(task: ModelTask, audit: ModelAudit, progress: Reporter, steps: int) -> _Built:
    """The model and its inputs: configured, from its factory, none, or inferred."""
    from torchwise.doctor import at_doctor_sizes, doctor_inputs, seed_all
    from torchwise.project.infer import infer_input
    from torchwise.target import parse_input_spec

    module, plan = task.module, task.module.build
    seed_all(0)  # doctor's default seed: the same initial weights as `torchwise doctor`
    if plan.inputs or plan.inputs_source in ("configured", "factory"):
        resolved = _resolve(task, plan.inputs)
        audit.inputs = [str(spec) for spec in resolved.input_specs]
        audit.inputs_source = plan.inputs_source
        return _Built(resolved.model, resolved.args, resolved.kwargs)
    if plan.inputs_source == "none" or module.forward_inputs == 0:
        resolved = _resolve(task, [])
        audit.inputs_source = "none"
        return _Built(resolved.model, resolved.args, resolved.kwargs)
    # Placeholder tensors only to get the model built: resolve_target checks that the
    # inputs fit forward's signature before it returns the model.
    count = 1 if module.forward_inputs is None else module.forward_inputs
    model = _resolve(task, ["f32[1]"] * count).model
    if not any(True for _ in model.parameters()):
        raise _Skip("no parameters: nothing to measure")
    if count != 1:
        raise _Skip(
            f"forward takes {count} inputs; torchwise infers only one: "
            "configure them in [tool.torchwise.models]"
        )
    progress(1, steps, f"inferring the input of {module.name}")
    spec, errors = infer_input(model)
    if spec is None:
        tried = f" (tried {len(errors)}, e.g. {errors[0]})" if errors else ""
        raise _Skip(f"could not infer the input from the first layer{tried}")
    # the batch doctor's own front end would use (a few samples, a short sequence)
    sized = at_doctor_sizes(parse_input_spec(spec))
    args, kwargs = doctor_inputs([sized], device="cpu")
    audit.inputs, audit.inputs_source = [str(sized)], "inferred"
    return _Built(model, args, kwargs)


class _Skip(Exception):
    """The model was built but cannot be measured; the message says why."""


def audit_model(task: ModelTask, progress: Reporter) -> ModelAudit:
    """Build, infer inputs, inspect, doctor: whatever succeeds, with the first error."""
    module = task.module
    started = time.perf_counter()
    audit = ModelAudit(
        name=module.name, path=module.path, target=module.build.target or module.path
    )
    checks = doctor_selection(task.doctor_checks)
    steps = 3 + len(checks)
    import_from(Path(task.root))
    progress(0, steps, f"building {module.name}")
    try:
        built = _build(task, audit, progress, steps)
    except _Skip as exc:
        audit.error = str(exc)
        return _done(audit, module, started)
    except Exception as exc:
        audit.error = _user_error(exc, f"building {module.name}")
        return _done(audit, module, started)
    progress(2, steps, f"inspecting {module.name}")
    try:
        from torchwise.model import summarize

        summary = summarize(built.model, built.args, built.kwargs, device="meta", name=module.name)
        audit.measure = evidence.model_measure(summary, depth=task.depth)
    except Exception as exc:
        audit.error = _user_error(exc, f"inspecting {module.name}")
    _partial(progress, audit, module, started)  # kept if doctor is then stopped
    if checks:
        try:
            _doctor(audit, module, built, checks, progress, started)
        except Exception as exc:
            audit.error = audit.error or _user_error(exc, f"doctor on {module.name}")
    return _done(audit, module, started)


def doctor_selection(wanted: Sequence[str] | None) -> list[str]:
    """The doctor check ids to run: none, every one (``()``), or those named that exist."""
    if wanted is None:
        return []
    from torchwise.doctor import CHECK_IDS

    return [c for c in CHECK_IDS if not wanted or c in wanted]


def _doctor(
    audit: ModelAudit,
    module: ModuleClass,
    built: _Built,
    checks: list[str],
    progress: Reporter,
    started: float,
) -> None:
    """Run the checks one at a time into ``audit.doctor``, reporting progress between
    them and sending each result as it comes, so that a large model stopped at its
    time limit keeps the checks it finished."""
    from torchwise.doctor import check

    parts: list[DoctorSummary] = []
    steps = 3 + len(checks)
    for index, check_id in enumerate(checks):
        progress(3 + index, steps, f"doctor {check_id} on {module.name}")
        report = check(
            built.model,
            built.args,
            [check_id],
            kwargs=built.kwargs,
            name=module.name,
        )
        parts.append(evidence.doctor_summary(report))
        audit.doctor = evidence.merge_doctor(parts)
        if index + 1 < len(checks):
            _partial(progress, audit, module, started)


def command_for(module: ModuleClass, inputs: Sequence[str]) -> str:
    """The ``torchwise inspect`` command (run from the project root) that builds it again."""
    import shlex

    plan = module.build
    words = ["torchwise", "inspect"]
    if plan.how == "config-class":
        words += [module.path, "--build", plan.build or ""]
    else:
        words.append(plan.target or module.path)
    if plan.how != "configured" or plan.inputs_source != "configured":
        for spec in inputs:
            words += ["--input", spec]
    return shlex.join(words)


def _partial(progress: Reporter, audit: ModelAudit, module: ModuleClass, started: float) -> None:
    send = getattr(progress, "partial", None)
    if send is not None:
        send(_done(audit.model_copy(deep=True), module, started))


def _done(audit: ModelAudit, module: ModuleClass, started: float) -> ModelAudit:
    audit.command = command_for(module, audit.inputs)
    audit.seconds = round(time.perf_counter() - started, 2)
    return audit
