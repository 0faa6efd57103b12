"""Phrases every output format shares, so text, Markdown and HTML say the same thing."""

from __future__ import annotations

from collections.abc import Callable

from torchwise.project.render.numbers import count, exact, nbytes
from torchwise.project.schema import (
    BuildPlan,
    MergedFinding,
    ModelAudit,
    ModuleClass,
    Package,
    ProjectCommand,
    ProjectKnowledge,
    ProjectReport,
    TorchRuntime,
)

PURPOSE_ORDER = ("train", "evaluate", "test", "export", "profile", "prepare", "run")
LAYOUT_LABELS = (
    ("model_dirs", "model dirs"),
    ("checkpoint_dirs", "checkpoint dirs"),
    ("training_scripts", "training scripts"),
    ("config_dirs", "config dirs"),
    ("test_dirs", "test dirs"),
    ("notebooks", "notebooks"),
)


def _plain(text: str) -> str:
    return text


def _recipe(plan: BuildPlan, code: Callable[[str], str]) -> str | None:
    if plan.how == "configured":
        return f"configured as {code(plan.target or '?')}"
    if plan.how == "default":
        return "default constructor"
    if plan.how == "factory":
        return f"factory {code((plan.target or '?').rpartition(':')[2] + '()')}"
    if plan.how == "config-class":
        return f"{code(plan.build or '?')}"
    return None


def plan_text(plan: BuildPlan, code: Callable[[str], str] = _plain) -> str:
    """How torchwise builds a module, in a few words (``code`` formats names and code).

    A recipe is stated as one only once it was tried and worked; a plan read from the
    code says it was not tried; a build that failed says what it needs.
    """
    recipe = _recipe(plan, code)
    if plan.status == "failed":
        return f"needs {plan.needs}" if plan.needs else f"failed: {plan.error}"
    if recipe is None:
        return plan.reason or "needs arguments"
    if plan.status == "built":
        fed = f", fed {', '.join(code(s) for s in plan.inputs)}" if plan.inputs else ""
        return f"built with {recipe}{fed}"
    if plan.how == "configured":
        return f"not tried: {recipe}"
    return f"not tried: would build with {recipe}"


def command_text(command: ProjectCommand, code: Callable[[str], str] = _plain) -> str:
    """``python train.py`` in ``pygcn/``: what it does."""
    where = f" in {code(command.cwd + '/')}" if command.cwd != "." else ""
    what = f": {command.description}" if command.description else ""
    return f"{code(command.command)}{where}{what}"


def module_where(module: ModuleClass) -> str:
    """``model.py:12``, or ``nb.ipynb:cell 4:2`` for a notebook (as review writes it)."""
    if module.cell is not None:
        return f"{module.path}:cell {module.cell}:{module.line}"
    return f"{module.path}:{module.line}"


def libraries_text(packages: list[Package]) -> str:
    """The libraries without a known role, in one line: ``tqdm (3), lmdb (declared)``."""
    return ", ".join(
        f"{p.name} ({p.imported_by})" if p.imported_by else f"{p.name} (declared)" for p in packages
    )


def module_role(module: ModuleClass) -> str:
    kind = "" if module.kind == "module" else f"{module.kind} "
    return f"{kind}{'model' if module.top_level else 'component'}"


def package_text(package: Package) -> str:
    declared = f"declared {package.declared}" if package.declared else "not declared"
    installed = f"installed {package.installed}" if package.installed else "not installed"
    imported = (
        f"imported by {package.imported_by} file(s)" if package.imported_by else "not imported"
    )
    if package.via and package.imported_by:
        imported += f" (needed by {package.via})"
    return f"{declared}, {installed}, {imported}"


def torch_text(torch: TorchRuntime) -> str:
    parts = [
        f"declared {torch.declared}" + (f" ({torch.declared_in})" if torch.declared_in else "")
        if torch.declared
        else "not declared",
        f"installed {torch.installed}" if torch.installed else "not installed",
    ]
    if torch.cuda_available is not None:
        cuda = (
            f"CUDA {torch.cuda_version} with {len(torch.gpus)} GPU(s): {', '.join(torch.gpus)}"
            if torch.cuda_available
            else "no CUDA device"
        )
        parts.append(cuda)
    if torch.mps_available is not None:
        parts.append("MPS available" if torch.mps_available else "no MPS")
    return "; ".join(parts)


def verdict_text(knowledge: ProjectKnowledge) -> str:
    if not knowledge.is_pytorch:
        return "no PyTorch found (no torch dependency, import, checkpoint or nn.Module)"
    reasons = ", ".join(t.kind for t in knowledge.triggers)
    return f"a PyTorch project (found: {reasons})"


def headline(report: ProjectReport) -> list[tuple[str, str]]:
    """The numbers on the report's first line, as (label, value)."""
    k = report.knowledge
    items = [
        ("Python files", exact(k.python_files)),
        ("lines", exact(k.python_lines)),
        ("modules", f"{len(k.modules)} ({sum(m.top_level for m in k.modules)} top-level)"),
    ]
    if report.review is not None:
        s = report.review.by_severity
        items.append(("findings", f"{s['error']} errors, {s['warning']} warnings"))
    if report.checkpoints:
        unsafe = sum(c.verdict == "unsafe" for c in report.checkpoints)
        items.append(("checkpoints", f"{len(report.checkpoints)} ({unsafe} unsafe)"))
    if report.models:
        built = sum(m.measure is not None for m in report.models)
        items.append(("models measured", f"{built} of {len(report.models)}"))
    if report.run is not None:
        found = sum(row.severity != "info" for row in report.run.findings)
        ran = (
            "not run"
            if report.run.error
            else f"{found} bug{'' if found == 1 else 's'} found running it"
        )
        items.append(("training command", ran))
    return items


def model_line(audit: ModelAudit) -> str:
    """``311 k params, 393 MMACs, [8, 3, 32, 32] -> [8, 10]`` (or the error)."""
    m = audit.measure
    if m is None:
        return audit.error or "not measured"
    inputs = ", ".join(str(s) for s in m.inputs)
    outputs = ", ".join(str(s) for s in m.outputs)
    return (
        f"{count(m.total_params)} params ({nbytes(m.param_bytes)}), "
        f"{count(m.macs_forward, 'MACs')} forward, {inputs} -> {outputs}"
    )


def doctor_line(audit: ModelAudit) -> str:
    d = audit.doctor
    if d is None:
        return "not run"
    c = d.counts
    failed = [check.id for check in d.checks if check.status == "fail"]
    warned = [check.id for check in d.checks if check.status == "warn"]
    text = f"{c.get('fail', 0)} failed, {c.get('warn', 0)} warned, {c.get('pass', 0)} passed"
    if failed:
        text += f" (FAIL: {', '.join(failed)})"
    if warned:
        text += f" (warn: {', '.join(warned)})"
    return text


#: The merged report's sections, in the reviewer's order, with their headings.
SECTIONS = (
    ("critical", "Critical issues"),
    ("performance", "Performance"),
    ("practice", "Best practices"),
    ("positive", "What is done well"),
    ("tests", "Tests to add"),
)


def merged_sections(report: ProjectReport) -> list[tuple[str, str, list[MergedFinding]]]:
    """(key, heading, entries) for each section of the merged report that has entries."""
    grouped: dict[str, list[MergedFinding]] = {}
    for entry in report.merged:
        grouped.setdefault(entry.section, []).append(entry)
    return [(key, title, grouped[key]) for key, title in SECTIONS if key in grouped]


def provenance(entry: MergedFinding) -> str:
    """``confirmed by running the code``, ``only running the code shows this``, or ""."""
    if entry.confirmed:
        return "confirmed by running the code"
    if entry.execution_only:
        return "only running the code shows this"
    return ""


def place(entry: MergedFinding) -> str:
    if entry.path is None:
        return ""
    return f"{entry.path}:{entry.line}" if entry.line else entry.path
