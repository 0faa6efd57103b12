"""Every ``nn.Module`` class a project defines, and whether torchwise can build it.

Read from the parsed files only (:mod:`torchwise.project.source`): a class is a
module when one of its bases is ``torch.nn.Module`` (or another ``torch.nn``
layer, a ``LightningModule``, a transformers ``PreTrainedModel`` or a diffusers
``ModelMixin``) or a project class that is one, to any depth and across files.

The build plan says how to get an instance with no help from the user, in the
order a user would expect: a model configured in ``[tool.torchwise.models]``; a
constructor with no required arguments; a module-level factory that takes none;
a constructor whose one required argument is a config class that has defaults
(nanoGPT's ``GPT(GPTConfig())``); otherwise the arguments it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from torchwise.project.notebooks import NotebookCode
from torchwise.project.schema import BuildPlan, ModuleClass
from torchwise.project.source import ClassFacts, FileFacts

_LAYER_PREFIXES = ("torch.nn.", "nn.")


def external_kind(base: str) -> str | None:
    """The kind of module an external base class makes, or None when it is not one."""
    last = base.split(".")[-1]
    head = base.split(".")[0]
    if last == "LightningModule" and head in ("pytorch_lightning", "lightning", "pl", "L"):
        return "lightning"
    if head == "transformers" and (last.endswith("PreTrainedModel") or last.endswith("Model")):
        return "transformers"
    if head == "diffusers" and (last == "ModelMixin" or last.endswith("Model")):
        return "diffusers"
    if base.startswith(_LAYER_PREFIXES) and last.lstrip("_")[:1].isupper():
        return "module"
    if base in ("Module", "torch.nn.modules.module.Module"):
        return None  # a bare unresolved "Module" is too ambiguous on its own
    return None


@dataclass(frozen=True)
class _Located:
    facts: ClassFacts
    path: str


class ClassIndex:
    """All classes of the project by name, with the module test and inherited facts."""

    def __init__(self, files: Iterable[FileFacts]) -> None:
        self.by_name: dict[str, list[_Located]] = {}
        self.files: dict[str, FileFacts] = {}
        for file in files:
            self.files[file.path] = file
            for cls in file.classes:
                self.by_name.setdefault(cls.name, []).append(_Located(cls, file.path))
        self._kinds: dict[tuple[str, str], str | None] = {}
        #: Every directory and module name of the project: the heads of its own imports.
        self.project_names = {
            part.removesuffix(".py") for path in self.files for part in path.split("/")
        }

    def lookup(self, base: str, near: str) -> _Located | None:
        """The project class a base name refers to (same file first, then by module path)."""
        name = base.split(".")[-1]
        candidates = self.by_name.get(name, [])
        if not candidates:
            return None
        for located in candidates:
            if located.path == near:
                return located
        module_path = "/".join(base.split(".")[:-1])
        for located in candidates:
            if module_path and located.path.removesuffix(".py").endswith(module_path):
                return located
        return candidates[0]

    def kind(self, located: _Located, seen: frozenset[tuple[str, str]] = frozenset()) -> str | None:
        """The module kind of a class, or None when it is not an nn.Module."""
        key = (located.path, located.facts.name)
        if key in self._kinds:
            return self._kinds[key]
        if key in seen:
            return None  # a cycle (a class shadowing its own base's name)
        result = None
        for base in located.facts.bases:
            result = external_kind(base)
            if result is None:
                parent = self.lookup(base, located.path)
                if parent is not None and parent.facts is not located.facts:
                    result = self.kind(parent, seen | {key})
            if result is not None:
                break
        self._kinds[key] = result
        return result

    def inherited(self, located: _Located, attribute: str) -> Any:
        """``init_required``/``forward_required`` from the class or its nearest project base."""
        seen: set[tuple[str, str]] = set()
        current: _Located | None = located
        while current is not None and (current.path, current.facts.name) not in seen:
            seen.add((current.path, current.facts.name))
            value = getattr(current.facts, attribute)
            if value is not None:
                return value
            parents = [self.lookup(b, current.path) for b in current.facts.bases]
            project = [p for p in parents if p is not None and p.facts is not current.facts]
            if not project:
                # Only external bases: nn.Module() and LightningModule() take no arguments;
                # another base's constructor (nn.Linear(in, out), PreTrainedModel(config))
                # takes arguments torchwise cannot know.
                bare = ("Module", "LightningModule")
                if attribute == "init_required" and all(
                    b.split(".")[-1] in bare for b in current.facts.bases
                ):
                    return []
                return None
            current = project[0]
        return None


def _config_class(index: ClassIndex, cls: ClassFacts, path: str, required: list[str]) -> str | None:
    """The project class with defaults that the one required argument wants, if any."""
    if len(required) != 1:
        return None
    parameter = required[0]
    wanted = cls.init_annotations.get(parameter)
    candidates: list[_Located] = []
    if wanted:
        found = index.lookup(wanted, path)
        candidates = [found] if found else []
    elif parameter.lower() in ("config", "cfg", "conf", "args", "hparams", "params"):
        same_file = index.files[path].classes
        candidates = [
            _Located(c, path) for c in same_file if c.name.lower().endswith(("config", "args"))
        ]
        if len(candidates) != 1:
            return None
    for located in candidates:
        facts = located.facts
        if index.kind(located) is None and (facts.all_defaults or facts.is_dataclass):
            if facts.is_dataclass and not facts.all_defaults:
                return None
            return facts.name
    return None


def _factory(file: FileFacts, class_name: str) -> tuple[str, bool] | None:
    """A module-level function of the file that takes no arguments and returns the class."""
    for function in file.functions:
        if not function.required and class_name in function.returns:
            return function.name, False
    return None


def _configured(
    models: Mapping[str, Mapping[str, Any]], path: str, cls: ClassFacts, file: FileFacts
) -> tuple[str, list[str]] | None:
    """The ``[tool.torchwise.models]`` entry whose target is this class (or its factory)."""
    for name, entry in models.items():
        target = entry.get("target")
        if not isinstance(target, str) or ":" not in target:
            continue
        module_ref, _, attr = target.rpartition(":")
        module_path = module_ref if module_ref.endswith(".py") else module_ref.replace(".", "/")
        if not (path == module_path or path.endswith("/" + module_path.removeprefix("./"))):
            continue
        factories = {f.name for f in file.functions if cls.name in f.returns}
        if attr == cls.name or attr in factories:
            inputs = entry.get("inputs", entry.get("input", []))
            return name, [inputs] if isinstance(inputs, str) else list(inputs)
    return None


def build_plan(
    index: ClassIndex, located: _Located, models: Mapping[str, Mapping[str, Any]]
) -> BuildPlan:
    cls, path = located.facts, located.path
    file = index.files[path]
    if path.endswith(".ipynb"):
        return BuildPlan(
            how="notebook",
            reason="defined in a notebook: torchwise builds models from .py files "
            f"(move {cls.name} into a module to inspect it)",
        )
    configured = _configured(models, path, cls, file)
    if configured is not None:
        name, inputs = configured
        return BuildPlan(
            how="configured",
            target=name,
            inputs=inputs,
            inputs_source="configured" if inputs else "unknown",
        )
    required = index.inherited(located, "init_required")
    forward = index.inherited(located, "forward_required")
    no_inputs: Literal["none", "unknown"] = "none" if forward == 0 else "unknown"
    if required == []:
        return BuildPlan(how="default", target=f"{path}:{cls.name}", inputs_source=no_inputs)
    factory = _factory(file, cls.name)
    if factory is not None:
        return BuildPlan(how="factory", target=f"{path}:{factory[0]}", inputs_source=no_inputs)
    if required:
        config = _config_class(index, cls, path, required)
        if config is not None:
            return BuildPlan(
                how="config-class",
                target=path,
                build=f"{cls.name}({config}())",
                inputs_source=no_inputs,
                required=required,
            )
        return BuildPlan(
            how="needs-arguments",
            required=required,
            reason=f"__init__ needs {', '.join(required)}",
        )
    base = next((b for b in cls.bases if external_kind(b)), "its base class")
    return BuildPlan(
        how="needs-arguments", reason=f"constructor inherited from {base}; arguments unknown"
    )


def find_modules(
    files: Iterable[FileFacts],
    models: Mapping[str, Mapping[str, Any]] | None = None,
    notebooks: Mapping[str, NotebookCode] | None = None,
) -> list[ModuleClass]:
    """Every module class of the project, in path and line order, with its build plan.

    ``notebooks`` holds the code of the notebooks among ``files`` (their classes are
    reported by cell and line in the cell).
    """
    files = list(files)
    notebooks = notebooks or {}
    index = ClassIndex(files)
    models = models or {}
    found: list[tuple[_Located, str]] = []
    for located_list in index.by_name.values():
        for located in located_list:
            kind = index.kind(located)
            if kind is not None:
                found.append((located, kind))
    # A class used inside another module class is a part of it (a block, a layer), unless
    # the user is a LightningModule that uses just one: that wraps the model, which stays
    # the model (a LightningModule that builds several is the model, and they its parts,
    # as deepspeech.pytorch's DeepSpeech). So is a class a factory passes to the model it
    # returns (a block type).
    names = {located.facts.name for located, _ in found}
    used: set[tuple[str, str]] = set()
    for located, kind in found:
        parts = _referenced(index, located.path, located.facts.references, names)
        if kind != "lightning" or len({name for _, name in parts}) >= 2:
            used |= parts
    for facts in files:
        for function in facts.functions:
            if function.returns & names:
                used |= _referenced(index, facts.path, function.passes, names)
        used |= _assembled_parts(index, facts, names)
    modules = []
    for located, kind in found:
        if _is_loss(index, located):
            kind = "loss"
        line, cell = located.facts.line, None
        notebook = notebooks.get(located.path)
        if notebook is not None and (where := notebook.where(line)) is not None:
            cell, line = where
        modules.append(
            ModuleClass(
                name=located.facts.name,
                path=located.path,
                line=line,
                cell=cell,
                bases=located.facts.bases,
                kind=kind,  # type: ignore[arg-type]
                # a loss is a module but never a model of the project
                top_level=kind != "loss" and (located.path, located.facts.name) not in used,
                forward_inputs=index.inherited(located, "forward_required"),
                build=build_plan(index, located, models),
            )
        )
    return sorted(modules, key=lambda m: (m.path, m.line))


#: torch's loss base classes, and the names a loss class is given.
_LOSS_BASES = frozenset({"_Loss", "_WeightedLoss"})
_LOSS_SUFFIXES = ("Loss", "Criterion")


def _is_loss(index: ClassIndex, located: _Located) -> bool:
    """A loss function written as a module (``DiceLoss``, ``LabelSmoothingCriterion``)."""
    if located.facts.name.endswith(_LOSS_SUFFIXES):
        return True
    for base in located.facts.bases:
        if base.split(".")[-1] in _LOSS_BASES:
            return True
        parent = index.lookup(base, located.path)
        if (
            parent is not None
            and parent.facts is not located.facts
            and parent.facts.name.endswith(_LOSS_SUFFIXES)
        ):
            return True
    return False


def _assembled_parts(index: ClassIndex, facts: FileFacts, names: set[str]) -> set[tuple[str, str]]:
    """The module classes a file assembles into another one (builders, notebooks).

    Giving a constructor two built modules or more (``Seq2Seq(encoder, decoder)``), or a
    collection of them (``Encoder(nn.ModuleList(blocks))``), makes them its parts; one
    instance alone is wrapped (``Trainer(model)``, a LightningModule) and stays a model.
    """
    used: set[tuple[str, str]] = set()
    for whole, carried in facts.assembled:
        if whole not in names:
            continue
        wholes = [located for located in index.by_name[whole] if index.kind(located) != "lightning"]
        if not wholes:
            continue
        arguments = [(parts & names, many) for parts, many in carried if parts & names]
        if len(arguments) >= 2 or any(many for _, many in arguments):
            for parts, _ in arguments:
                used |= _referenced(index, facts.path, set(parts), names)
    return used


def _referenced(
    index: ClassIndex, path: str, references: set[str], names: set[str]
) -> set[tuple[str, str]]:
    """The project's module classes (path, name) that ``references`` (resolved names used
    in ``path``) can mean: a bare name is a class of the same file or one the file
    imports (by name or ``*``); a dotted name must start with a package or module of the project, so
    ``torch.nn.Transformer`` never means the project's own ``Transformer``."""
    file = index.files.get(path)
    imported = file.imported if file is not None else set()
    project = index.project_names
    found: set[tuple[str, str]] = set()
    for reference in references:
        head, _, _ = reference.partition(".")
        name = reference.rpartition(".")[2]
        if name not in names:
            continue
        for located in index.by_name.get(name, []):
            same_file = located.path == path
            if "." not in reference:
                if same_file or name in imported or "*" in imported:
                    found.add((located.path, name))
            elif head in project:
                found.add((located.path, name))
    return found
