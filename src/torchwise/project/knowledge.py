"""Project knowledge: the static facts, gathered in one walk and one parse per file.

Nothing here imports or runs the project's code; the only import is torch itself
(to ask for CUDA and MPS), and only when ``probe_devices`` is set.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from torchwise.config import load_config
from torchwise.errors import TorchwiseError
from torchwise.project import environment
from torchwise.project.command_sources import find_commands
from torchwise.project.commands import script_of
from torchwise.project.files import ProjectFiles, read_text, walk
from torchwise.project.modules import find_modules
from torchwise.project.notebooks import MAX_NOTEBOOK_BYTES, NotebookCode, read_notebook
from torchwise.project.requirements import declared
from torchwise.project.schema import Layout, ModuleClass, ProjectKnowledge, Trigger
from torchwise.project.source import FileFacts, analyse

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_CHECKPOINT_DIR_NAMES = frozenset(
    {"checkpoints", "checkpoint", "ckpt", "ckpts", "weights", "pretrained", "saved_models",
     "lightning_logs", "models_saved", "snapshots"}
)  # fmt: skip
_CONFIG_DIR_NAMES = frozenset(
    {"configs", "config", "conf", "cfg", "cfgs", "hparams", "experiments"}
)
_TRAIN_NAME = re.compile(
    r"(^|_)(train|training|finetune|fine_tune|pretrain|fit)(_|\.py$)|^main\.py$"
)
_LIST_CAP = 30


@dataclass
class ProjectScan:
    """The knowledge and what it was read from (the audit reuses both)."""

    knowledge: ProjectKnowledge
    files: ProjectFiles
    facts: dict[str, FileFacts] = field(default_factory=dict)
    models_config: dict[str, dict[str, Any]] = field(default_factory=dict)


def _project_name(root: Path) -> str:
    text = read_text(root / "pyproject.toml")
    if text:
        try:
            name = tomllib.loads(text).get("project", {}).get("name")
        except tomllib.TOMLDecodeError:
            name = None
        if isinstance(name, str) and name:
            return name
    return root.name


def _configured_models(root: Path) -> dict[str, dict[str, Any]]:
    """``[tool.torchwise.models]`` of the project's own pyproject.toml (not a parent's)."""
    if not (root / "pyproject.toml").is_file():
        return {}
    config = load_config(path=root / "pyproject.toml")
    models = config.get("models", {}) or {}
    return {name: dict(entry) for name, entry in models.items() if isinstance(entry, dict)}


def _parent(relative: str) -> str:
    parent = str(PurePosixPath(relative).parent)
    return parent


def _layout(files: ProjectFiles, facts: dict[str, FileFacts], modules: list[ModuleClass]) -> Layout:
    model_dirs = Counter(
        _parent(m.path) for m in modules if not m.path.endswith(".ipynb") and m.kind != "loss"
    )
    checkpoint_dirs = {_parent(p) for p in files.checkpoints}
    checkpoint_dirs |= {d for d in files.dirs if d.rsplit("/", 1)[-1] in _CHECKPOINT_DIR_NAMES}
    # A dir named for configs that holds config files (YAML, JSON, TOML, or Python
    # configs as nanoGPT's config/), or any dir with three YAML files or more; nested
    # config dirs are listed by their outermost one.
    config_files = [*files.configs, *files.python]
    config_dirs = {
        d
        for d in files.dirs
        if d.rsplit("/", 1)[-1].lower() in _CONFIG_DIR_NAMES
        and any(c.startswith(d + "/") for c in config_files)
    }
    yaml_dirs = Counter(
        _parent(c)
        for c in files.configs
        if c.endswith((".yaml", ".yml")) and not c.startswith(".") and not _manifest(files, c)
    )
    config_dirs |= {d for d, n in yaml_dirs.items() if n >= 3}
    config_dirs = {d for d in config_dirs if not any(d.startswith(o + "/") for o in config_dirs)}
    training = [
        path
        for path, fact in facts.items()
        if not _is_test(path)
        and (fact.trains or _TRAIN_NAME.search(path.rsplit("/", 1)[-1]))
        and (fact.trains or fact.imports.keys() & {"torch", "lightning", "pytorch_lightning"})
    ]
    training.sort(key=lambda p: (not _TRAIN_NAME.search(p.rsplit("/", 1)[-1]), p.count("/"), p))
    test_dirs = sorted(
        {d for d in files.dirs if d.rsplit("/", 1)[-1] in ("tests", "test")}
        | {
            _parent(p)
            for p in facts
            if _is_test(p) and "/" in p and p.rsplit("/", 1)[-1].startswith("test_")
        }
    )
    test_dirs = [d for d in test_dirs if not any(d.startswith(o + "/") for o in test_dirs)]
    return Layout(
        model_dirs=[d for d, _ in sorted(model_dirs.items(), key=lambda x: (-x[1], x[0]))],
        checkpoint_dirs=sorted(checkpoint_dirs)[:_LIST_CAP],
        training_scripts=training[:_LIST_CAP],
        config_dirs=sorted(config_dirs)[:_LIST_CAP],
        test_dirs=test_dirs[:_LIST_CAP],
        notebooks=files.notebooks[:_LIST_CAP],
    )


def _manifest(files: ProjectFiles, relative: str) -> bool:
    """A deployment manifest (Kubernetes, Docker Compose), not a configuration of the code."""
    text = read_text(files.path(relative), limit=200_000) or ""
    return bool(re.search(r"^(apiVersion|services):", text, re.M))


def _is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    parts = path.split("/")[:-1]
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or bool({"tests", "test"} & set(parts))
    )


def _triggers(
    stack_names: dict[str, str | None],
    facts: dict[str, FileFacts],
    files: ProjectFiles,
    modules: list[ModuleClass],
) -> list[Trigger]:
    triggers = []
    for name, where in stack_names.items():
        if name in environment.TORCH_FAMILY and where is not None:
            path, _, line = where.partition(":")
            triggers.append(
                Trigger(
                    kind="dependency",
                    path=path,
                    line=int(line) if line.isdigit() else None,
                    detail=f"{name} is a declared dependency",
                )
            )
    importing = [(p, f.imports["torch"]) for p, f in facts.items() if "torch" in f.imports]
    if importing:
        first, number = importing[0]
        more = f" (and {len(importing) - 1} more files)" if len(importing) > 1 else ""
        triggers.append(
            Trigger(kind="import", path=first, line=number, detail=f"import torch{more}")
        )
    if files.checkpoints:
        more = f" (and {len(files.checkpoints) - 1} more)" if len(files.checkpoints) > 1 else ""
        triggers.append(
            Trigger(kind="checkpoint", path=files.checkpoints[0], detail=f"checkpoint file{more}")
        )
    if modules:
        module = modules[0]
        more = f" (and {len(modules) - 1} more)" if len(modules) > 1 else ""
        triggers.append(
            Trigger(
                kind="module",
                path=module.path,
                line=module.line,
                detail=f"class {module.name}({', '.join(module.bases)}){more}",
            )
        )
    return triggers


def scan_project(root: Path, *, probe_devices: bool = True) -> ProjectScan:
    """Walk and parse the project at ``root`` (a directory) into its knowledge."""
    root = root.resolve()
    if not root.is_dir():
        raise TorchwiseError(
            f"not a directory: {root}", hint="give the project's root directory, e.g. ."
        )
    files = walk(root)
    facts: dict[str, FileFacts] = {}
    for relative in files.python:
        text = read_text(root / relative)
        if text is not None:
            facts[relative] = analyse(text, relative)
    notebooks = _notebooks(root, files.notebooks)
    notebook_facts = {path: analyse(code.source, path) for path, code in notebooks.items()}
    models_config = _configured_models(root)
    modules = find_modules([*facts.values(), *notebook_facts.values()], models_config, notebooks)
    requirements, python = declared(root, [*files.configs, *files.other, *files.python])
    imports: Counter[str] = Counter()
    for fact in [*facts.values(), *notebook_facts.values()]:
        imports.update(fact.imports.keys())
    packages, installed_where = environment.stack(
        root,
        requirements,
        imports,
        modules=[fact.modules for fact in [*facts.values(), *notebook_facts.values()]],
        local=_local_names(files),
    )
    torch = environment.torch_runtime(packages, installed_where, probe=probe_devices)
    everything = [*files.python, *files.configs, *files.other]
    layout = _layout(files, facts, modules)
    commands = find_commands(
        root,
        everything,
        # what trains: the training scripts of the layout (a main.py that calls a Solver)
        trains=frozenset(layout.training_scripts) | {p for p, f in facts.items() if f.trains},
        downloads=frozenset(path for path, fact in facts.items() if fact.downloads),
        notebook_shell={path: code.shell for path, code in notebooks.items() if code.shell},
    )
    notes = []
    if files.truncated:
        notes.append("the project has more files than torchwise walks; the rest was skipped")
    unparsed = sorted(p for p, f in facts.items() if f.parse_error)
    if unparsed:
        notes.append(f"{len(unparsed)} Python file(s) do not parse, e.g. {unparsed[0]}")
    triggers = _triggers(
        {p.name: p.declared_in for p in packages}, {**facts, **notebook_facts}, files, modules
    )
    # a script the project documents as its training run is a training script, even when
    # it only calls the code that trains (deepspeech.pytorch's train.py, a Hydra entry)
    for command in commands:
        script = script_of(command.command) if command.purpose == "train" else None
        path = str(PurePosixPath(command.cwd) / script) if script else None
        if path and path in facts and path not in layout.training_scripts:
            layout.training_scripts.append(path)
    knowledge = ProjectKnowledge(
        root=str(root),
        name=_project_name(root),
        is_pytorch=bool(triggers),
        triggers=triggers,
        python=python,
        stack=packages,
        torch=torch,
        layout=layout,
        commands=commands,
        modules=modules,
        checkpoints=files.checkpoints,
        configured_models=sorted(models_config),
        python_files=len(files.python),
        python_lines=sum(f.lines for f in facts.values()),
        notes=notes,
    )
    return ProjectScan(knowledge, files, facts, models_config)


def _notebooks(root: Path, paths: list[str]) -> dict[str, NotebookCode]:
    """The code of every notebook that can be read (outputs make some too large)."""
    found = {}
    for relative in paths:
        text = read_text(root / relative, limit=MAX_NOTEBOOK_BYTES)
        code = read_notebook(text) if text is not None else None
        if code is not None:
            found[relative] = code
    return found


def _local_names(files: ProjectFiles) -> set[str]:
    """The project's own module and package names: an import of one is not a dependency."""
    names: set[str] = set()
    for relative in files.python:
        parts = relative.removesuffix(".py").split("/")
        names.update(parts)
    return names


def gather_knowledge(root: Path, *, probe_devices: bool = True) -> ProjectKnowledge:
    """The project knowledge of the project at ``root`` (runs none of its code)."""
    return scan_project(root, probe_devices=probe_devices).knowledge
