"""The project index: every file of a run, summarised, joined into one model.

Before the rules run, each file contributes a :class:`~.summary.ModuleSummary`
(one pass over the file, cached with its findings). :class:`ProjectIndex` joins
them: it names each file as a module, resolves imports between them (absolute,
relative, packages, star imports, re-exports), flattens each ``nn.Module``
subclass across files (dropout, batch norm, the activation its output ends in),
closes each function's effects over the project's call graph (a ``validate()``
in ``engine.py`` that calls ``model.eval()`` sets eval mode wherever it is
called), records every call site with the values passed, every ``torch.save``
and the torch version the project declares.

A rule sees the index through an :class:`~.view.IndexView` of its own file. The view
is also what the findings cache keys on: :meth:`ProjectIndex.digest` hashes the
summaries of every file the view can reach, so a change elsewhere that could
change this file's findings invalidates them, and nothing else does.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.index.records import (
    CONFIG_LIBRARIES,
    CUDA_OPTIONAL,
    CUDA_REQUIRED,
    MAYBE_CONFIG,
    NAMESPACE_NAMES,
    TOP_LEVEL,
    ArgFact,
    CallFact,
    CallSite,
    ClassFact,
    ClassModel,
    FunctionFact,
    LoadFact,
    ModuleSummary,
    SaveFact,
    TorchRange,
)

if TYPE_CHECKING:
    from torchwise.review.index.view import IndexView

#: Layers that make a model behave differently in train and eval mode.
DROPOUT = re.compile(r"^torch\.nn\.(functional\.)?(\w*[Dd]ropout\w*|alpha_dropout\w*)$")
BATCHNORM = re.compile(
    r"^torch\.nn\.(BatchNorm\w*|SyncBatchNorm|LazyBatchNorm\w*|InstanceNorm\w*)$"
)
#: torch.nn layers that hold dropout inside (their default dropout is not 0).
DROPOUT_INSIDE = {
    "torch.nn.Transformer", "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
    "torch.nn.TransformerEncoder", "torch.nn.TransformerDecoder",
}  # fmt: skip
#: torchvision constructors of models with batch norm (the classic ImageNet CNNs).
TORCHVISION_BN = re.compile(
    r"^torchvision\.models\.(\w+\.)?(resnet\d+|resnext\w+|wide_resnet\w+|densenet\d+|vgg\d+_bn|"
    r"mobilenet\w*|efficientnet\w*|regnet\w*|googlenet|inception_v3|shufflenet\w*|mnasnet\w*|"
    r"fcn_\w+|deeplabv3\w*|lraspp\w*|fasterrcnn\w*|maskrcnn\w*|keypointrcnn\w*|retinanet\w*|"
    r"r3d_18|r2plus1d_18|mc3_18|s3d)$"
)
#: torchvision constructors of models with dropout but no batch norm.
TORCHVISION_DROPOUT = re.compile(r"^torchvision\.models\.(\w+\.)?(alexnet|vgg\d+|vit_\w+|swin\w*)$")
#: Bases that make a class an nn.Module without being torch.nn.<Layer>.
MODULE_BASES = {
    "pytorch_lightning.LightningModule",
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
    "pytorch_lightning.core.LightningModule",
    "lightning.pytorch.core.LightningModule",
}
_NOT_MODULES = {"torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.UninitializedParameter"}
#: What the argument of a real ``train(mode)`` override is called.
_MODE_NAMES = {"mode", "flag", "training", "is_training", "train", "value", "on", "enabled", "b"}


def is_torch_module_base(qualname: str) -> bool:
    if qualname in MODULE_BASES:
        return True
    last = qualname.rsplit(".", 1)[-1]
    return (
        qualname.startswith("torch.nn.")
        and last[:1].isupper()
        and qualname not in _NOT_MODULES
        and "utils" not in qualname
    )


class ProjectIndex:
    """Every summarised file of a run, with imports and call graph resolved."""

    def __init__(
        self,
        summaries: Iterable[ModuleSummary],
        torch_ranges: dict[str, TorchRange] | None = None,
    ) -> None:
        self.summaries: dict[str, ModuleSummary] = {s.path: s for s in summaries}
        self.torch_ranges = torch_ranges or {}
        self.names: dict[str, str] = {}  # path -> dotted module name
        self._suffixes: dict[str, list[str]] = {}  # dotted suffix -> paths
        for path in self.summaries:
            dotted = _module_name(path)
            self.names[path] = dotted
            parts = dotted.split(".")
            for start in range(len(parts)):
                self._suffixes.setdefault(".".join(parts[start:]), []).append(path)
        self._digests = {path: s.digest() for path, s in self.summaries.items()}
        self._classes: dict[str, ClassModel | None] = {}
        self._effects: dict[str, frozenset[str]] = {}
        self._resolved: dict[tuple[str, tuple[str, ...]], str | None] = {}
        self._callers: dict[str, list[CallSite]] | None = None
        self._saves: list[tuple[str, SaveFact]] | None = None
        self._optional_group: str | None = None  # "" once looked for and not found
        self._placements: dict[str, tuple[str, int]] | None = None
        self._dependencies: dict[str, frozenset[str]] = {}
        self._component_digests: dict[int, str] = {}

    # -- naming and resolution ------------------------------------------------
    def module_path(self, written: str, importer: str) -> str | None:
        """The file a dotted module name refers to, from ``importer``'s point of view."""
        if written.startswith("."):
            level = len(written) - len(written.lstrip("."))
            package = PurePosixPath(importer).parent
            for _ in range(level - 1):
                package = package.parent
            rest = written[level:]
            base = package.joinpath(*rest.split(".")) if rest else package
            for candidate in (f"{base}.py", f"{base}/__init__.py", f"{base}.pyi"):
                if candidate in self.summaries:
                    return candidate
            return None
        if written.split(".", 1)[0] in {"torch", "numpy", "torchvision"}:
            return None  # a project never shadows these as far as rules are concerned
        candidates = self._suffixes.get(written)
        if not candidates:
            return None
        # The closest file to the importer: Python finds siblings and its own package first.
        return max(candidates, key=lambda path: _shared_prefix(path, importer))

    def resolve(self, written: str, importer: str, depth: int = 0) -> str | None:
        """The id ("path::Class.method") a name written in ``importer`` refers to."""
        key = (importer, (written,))
        if key in self._resolved:
            return self._resolved[key]
        self._resolved[key] = None  # breaks import cycles
        result = self._resolve(written, importer, depth)
        self._resolved[key] = result
        return result

    def _resolve(self, written: str, importer: str, depth: int) -> str | None:
        if depth > 8:
            return None
        if written.startswith("<id>"):
            return written[4:]  # already an id (a value that came from another file)
        if written.startswith("<local>."):
            return self._symbol(importer, written[8:], depth)
        parts = written.split(".")
        leading = len(written) - len(written.lstrip("."))
        for split in range(len(parts), leading, -1):
            module = ".".join(parts[:split])
            if not module.strip("."):
                continue
            path = self.module_path(module, importer)
            if path is None:
                continue
            rest = ".".join(parts[split:])
            if not rest:
                return f"{path}::"
            return self._symbol(path, rest, depth)
        return None

    def _symbol(self, path: str, qualname: str, depth: int) -> str | None:
        """``qualname`` defined in (or re-exported by) the module at ``path``."""
        summary = self.summaries.get(path)
        if summary is None:
            return None
        head, _, tail = qualname.partition(".")
        if head in summary.classes:
            if not tail:
                return f"{path}::{head}"
            return self.method(f"{path}::{head}", tail, depth)
        if head in summary.functions and not tail:
            return f"{path}::{head}"
        imported = summary.imports.get(head)
        if imported is not None:
            target = self.resolve(imported, path, depth + 1)
            if target is not None and tail:
                module_path, _, inner = target.partition("::")
                return self._symbol(module_path, f"{inner}.{tail}" if inner else tail, depth + 1)
            return target
        for star in summary.star_imports:
            module = self.module_path(star, path)
            if module is not None and module != path:
                found = self._symbol(module, qualname, depth + 1)
                if found is not None:
                    return found
        return None

    def method(self, class_id: str, name: str, depth: int = 0) -> str | None:
        """The method ``name`` of a project class, looked up through its project bases."""
        seen: set[str] = set()
        pending = [class_id]
        while pending and depth < 16:
            current = pending.pop(0)
            if current in seen:
                continue
            seen.add(current)
            path, _, class_name = current.partition("::")
            fact = self._class_fact(current)
            if fact is None:
                continue
            if name in fact.methods:
                return f"{path}::{class_name}.{name}"
            for base in fact.bases:
                resolved = self.resolve(base, path, depth + 1)
                if resolved is not None and resolved.partition("::")[2]:
                    pending.append(resolved)
        return None

    def _class_fact(self, class_id: str) -> ClassFact | None:
        path, _, name = class_id.partition("::")
        summary = self.summaries.get(path)
        return None if summary is None else summary.classes.get(name)

    def function(self, function_id: str) -> FunctionFact | None:
        path, _, qualname = function_id.partition("::")
        summary = self.summaries.get(path)
        return None if summary is None else summary.functions.get(qualname)

    def ref_target(self, ref: list[str], path: str, caller_class: str | None = None) -> str | None:
        """The id of the project function a call reference (CallFact.ref) runs."""
        key = (path, tuple(ref))
        if key in self._resolved:
            return self._resolved[key]
        self._resolved[key] = None
        target = self._ref_target(ref, path, caller_class)
        self._resolved[key] = target
        return target

    def _ref_target(self, ref: list[str], path: str, caller_class: str | None) -> str | None:
        kind = ref[0]
        if kind == "written":
            target = self.resolve(ref[1], path)
        elif kind == "name":
            summary = self.summaries.get(path)
            if summary is None:
                return None
            if ref[1] in summary.functions or ref[1] in summary.classes:
                target = f"{path}::{ref[1]}"
            else:
                written = summary.imports.get(ref[1])
                target = None if written is None else self.resolve(written, path)
                if target is None:
                    for star in summary.star_imports:
                        module = self.module_path(star, path)
                        if module is not None:
                            target = self._symbol(module, ref[1], 1)
                            if target is not None:
                                break
        elif kind == "self":
            return self.method(f"{path}::{ref[1]}", ref[2])
        elif kind == "value":
            class_id = self.resolve(ref[1], path)
            return None if class_id is None else self.method(class_id, ref[2])
        else:
            return None
        if target is not None and self._class_fact(target) is not None:
            return self.method(target, "__init__")  # a constructor runs __init__
        return target

    def star_names(self, path: str, depth: int = 0) -> dict[str, str]:
        """Public names a module exports to a star import: what it defines (as
        ids) and what it imports (absolute names; relative ones as ids)."""
        summary = self.summaries.get(path)
        if summary is None or depth > 4:
            return {}
        names: dict[str, str] = {}
        for star in summary.star_imports:
            inner = self.module_path(star, path)
            if inner is not None and inner != path:
                names.update(self.star_names(inner, depth + 1))
        for local, written in summary.imports.items():
            if written.startswith("."):
                resolved = self.resolve(written, path)
                if resolved is not None:
                    names[local] = f"<id>{resolved}"
            else:
                names[local] = written
        for name in [*summary.classes, *summary.functions]:
            if name != TOP_LEVEL and "." not in name:
                names[name] = f"<id>{path}::{name}"
        return {name: value for name, value in names.items() if not name.startswith("_")}

    # -- classes ----------------------------------------------------------------
    def klass(self, class_id: str) -> ClassModel | None:
        if class_id in self._classes:
            return self._classes[class_id]
        self._classes[class_id] = None  # cycles: a class is not its own part
        fact = self._class_fact(class_id)
        if fact is None:
            return None
        path = class_id.partition("::")[0]
        is_module = dropout = batchnorm = unknown = False
        for base in fact.bases:
            written = base
            if is_torch_module_base(written):
                is_module = True
                dropout |= bool(DROPOUT.match(written)) or written in DROPOUT_INSIDE
                batchnorm |= bool(BATCHNORM.match(written))
                continue
            resolved = self.resolve(written, path)
            inner = None if resolved is None else self.klass(resolved)
            if inner is None:
                if written not in {"object", "<local>.object"} and not written.endswith(
                    ("ABC", "Generic", "Protocol", "Enum")
                ):
                    unknown = True
                continue
            is_module |= inner.is_module
            dropout |= inner.dropout
            batchnorm |= inner.batchnorm
            unknown |= inner.unknown
        for layer in fact.layers:
            if DROPOUT.match(layer) or layer in DROPOUT_INSIDE:
                dropout = True
            elif BATCHNORM.match(layer) or TORCHVISION_BN.match(layer):
                batchnorm = True
            elif TORCHVISION_DROPOUT.match(layer):
                dropout = True
            elif layer.startswith("torch.") or layer.startswith("torchvision.models."):
                continue
            else:
                resolved = self.resolve(layer, path)
                part = None if resolved is None else self.klass(resolved)
                if part is not None:
                    dropout |= part.dropout
                    batchnorm |= part.batchnorm
                    unknown |= part.unknown and part.is_module
                elif resolved is None and _looks_like_model(layer):
                    unknown = True
        # nn.Module.eval() calls self.train(False) and model.train() passes nothing:
        # an override must accept both and still set the mode.
        override = fact.train_params is not None and (
            not fact.train_sets_mode
            or not fact.train_params
            or fact.train_required > 1
            or (fact.train_required == 1 and fact.train_params[0] not in _MODE_NAMES)
        )
        frozen = tuple(
            attr for attr in fact.frozen if _has_batchnorm(fact.attributes.get(attr), batchnorm)
        )
        model = ClassModel(class_id, fact, is_module, dropout, batchnorm, unknown, override, frozen)
        self._classes[class_id] = model
        return model

    # -- devices ------------------------------------------------------------------
    def placement(self, class_id: str) -> tuple[str, int] | None:
        """(file, line) where the project moves a model of this class to the
        device: directly, as a part (an attribute or layer) of a model that is
        moved, or as the base of one."""
        if self._placements is None:
            self._placements = self._placed_classes()
        return self._placements.get(class_id)

    def _placed_classes(self) -> dict[str, tuple[str, int]]:
        found: dict[str, tuple[str, int]] = {}
        pending: list[str] = []
        for path, summary in self.summaries.items():
            for written, line in summary.placed:
                class_id = self.resolve(written, path)
                if class_id is not None and class_id not in found and self.klass(class_id):
                    found[class_id] = (path, line)
                    pending.append(class_id)
        while pending:
            current = pending.pop()
            fact = self._class_fact(current)
            if fact is None:
                continue
            path = current.partition("::")[0]
            parts = [a.origin for a in fact.attributes.values() if a.origin]
            for written in [*parts, *fact.layers, *fact.bases]:
                part = self.resolve(written, path)
                if part is None or part in found:
                    continue
                model = self.klass(part)
                if model is not None and model.is_module:
                    found[part] = found[current]
                    pending.append(part)
        return found

    # -- effects ------------------------------------------------------------------
    def effects(self, function_id: str) -> frozenset[str]:
        """What calling the function does, through every project function it calls."""
        if function_id in self._effects:
            return self._effects[function_id]
        self._effects[function_id] = frozenset()  # recursion: what is known so far
        fact = self.function(function_id)
        if fact is None:
            return frozenset()
        path = function_id.partition("::")[0]
        found = {event[0] for event in fact.events}
        for call in fact.calls:
            target = self.ref_target(call.ref, path, fact.class_name)
            if target is not None and target != function_id:
                reached = self.effects(target)
                found |= reached - {E.MODEL_CALL_WITH_GRAD} if call.no_grad else reached
        for ref in fact.spawns:
            target = self.ref_target(ref, path, fact.class_name)
            if target is not None and target != function_id:
                found |= self.effects(target)
        if fact.no_grad:
            found.add("no_grad")
            found.discard(E.MODEL_CALL_WITH_GRAD)
        result = frozenset(found)
        self._effects[function_id] = result
        return result

    def process_group_optional(self) -> str | None:
        """Where the project starts its process group on some paths only, as
        ``path:line``: under a test that chooses between a distributed and a
        single-process run (``if args.distributed:``, ``if world_size > 1:``,
        ``if "RANK" in os.environ:``, or after an early ``return`` for a
        single process). A start guarded only by ``is_initialized()`` is the
        same group started once; one under ``if __name__ == "__main__":`` or a
        choice of cluster (``if args.platform == "local":``) starts it on
        every path."""
        if self._optional_group is None:
            self._optional_group = ""
            for path, summary in sorted(self.summaries.items()):
                for fact in summary.functions.values():
                    for effect, line, _col, branch in fact.events:
                        conditions = [
                            text
                            for text, _ in branch
                            if DISTRIBUTED_CHOICE.search(text)
                            and "is_initialized" not in text
                            and "__name__" not in text
                        ]
                        if effect == E.INITS_PROCESS_GROUP and conditions:
                            self._optional_group = f"{path}:{line}"
                            return self._optional_group
        return self._optional_group or None

    def path_effects(self, function_id: str, flag: str, polarity: bool) -> frozenset[str]:
        """The effects on the path where parameter ``flag`` is ``polarity``."""
        fact = self.function(function_id)
        if fact is None:
            return frozenset()
        path = function_id.partition("::")[0]
        here: F.Branch = ((flag, polarity),)
        found = {e[0] for e in fact.events if not F.exclusive(tuple(e[3]), here)}
        for call in fact.calls:
            if F.exclusive(tuple(call.branch), here):
                continue
            target = self.ref_target(call.ref, path, fact.class_name)
            if target is None or target == function_id:
                continue
            passed = _passed_as(call, flag, self.function(target))
            found |= (
                self.path_effects(target, passed, polarity)
                if passed is not None
                else self.effects(target)
            )
        return frozenset(found)

    def trains_over(self, function_id: str, param: str) -> bool:
        """Whether the function trains over its parameter ``param``: a loop over it
        backpropagates and steps (directly or through the functions it calls)."""
        fact = self.function(function_id)
        if fact is None:
            return False
        path = function_id.partition("::")[0]
        for loop in fact.loops:
            if loop.iterated != param:
                continue
            found = set(loop.effects)
            for index in loop.calls:
                target = self.ref_target(fact.calls[index].ref, path, fact.class_name)
                if target is not None and target != function_id:
                    found |= self.effects(target)
            if {E.STEP} <= found and found & {E.BACKWARD, E.LEARNS}:
                return True
        return False

    # -- call sites -----------------------------------------------------------------
    def callers(self, function_id: str) -> list[CallSite]:
        if self._callers is None:
            self._callers = {}
            for path, summary in self.summaries.items():
                for qualname, fact in summary.functions.items():
                    caller = f"{path}::{qualname}"
                    for call in fact.calls:
                        target = self.ref_target(call.ref, path, fact.class_name)
                        if target is not None:
                            site = CallSite(
                                caller,
                                path,
                                call,
                                functools.partial(self._after_eval, fact, call, path),
                            )
                            self._callers.setdefault(target, []).append(site)
        return self._callers.get(function_id, [])

    def _after_eval(self, caller: FunctionFact, call: CallFact, path: str) -> bool:
        position = (call.line, call.col)
        branch = tuple(call.branch)
        for effect, line, col, event_branch in caller.events:
            before = (line, col) < position
            if effect == E.EVAL and before and not F.exclusive(tuple(event_branch), branch):
                return True
        for other in caller.calls:
            if (other.line, other.col) >= position or F.exclusive(tuple(other.branch), branch):
                continue
            target = self.ref_target(other.ref, path, caller.class_name)
            if target is not None and E.EVAL in self.effects(target):
                return True
        return False

    # -- project-wide facts -----------------------------------------------------------
    def saves(self) -> list[tuple[str, SaveFact]]:
        """Every ``torch.save`` of the project, with what its parameters receive
        filled in from the call sites (``save_checkpoint(..., args)``)."""
        if self._saves is None:
            self._saves = []
            for path, summary in self.summaries.items():
                for save in summary.saves:
                    self._saves.append((path, self._resolved_save(path, save)))
        return self._saves

    def _resolved_save(self, path: str, save: SaveFact) -> SaveFact:
        imports_argparse = "argparse" in self.summaries[path].imports.values()

        def kind(text: str | None) -> str | None:
            if text == MAYBE_CONFIG:
                return "config" if self._uses_config_library() else "other"
            if text is not None and text.startswith("ref:"):
                return self._built_kind(text[4:], path)
            if text is None or not text.startswith("param:") or save.function is None:
                return text
            name = text[6:]
            passed = self._passed_kind(f"{path}::{save.function}", name)
            if passed is None and imports_argparse and name in NAMESPACE_NAMES:
                return "namespace"  # `"args": args` in a script that parses arguments
            return passed or "other"

        whole = save.whole
        if whole is not None and whole.startswith("param:") and save.function is not None:
            passed = self._passed_dict(f"{path}::{save.function}", whole[6:])
            if passed is not None:  # `save_checkpoint({"epoch": e, ...})`: the caller's dict
                save = dataclasses.replace(save, whole=None, keys=passed)
        keys = {key: kind(value) or "other" for key, value in save.keys.items()}
        return dataclasses.replace(save, whole=kind(save.whole), keys=keys)

    def _uses_config_library(self) -> bool:
        """Whether a file of the project imports yacs, OmegaConf, EasyDict, ..."""
        return any(
            written.split(".")[0].lower() in CONFIG_LIBRARIES
            for summary in self.summaries.values()
            for written in summary.imports.values()
        )

    def _passed_dict(self, function_id: str, param: str) -> dict[str, str] | None:
        """The keys of a dict literal a caller passes as ``param`` (what each
        holds, the callers' own kinds merged), when one does."""
        fact = self.function(function_id)
        if fact is None:
            return None
        params = [p for p in fact.params if p not in {"self", "cls"}]
        merged: dict[str, str] = {}
        for site in self.callers(function_id):
            passed = dict(zip(params, site.fact.args, strict=False))
            passed.update(site.fact.keywords)
            given = passed.get(param)
            if param == "*0":  # the first argument a `*args` forwarder receives
                extra = site.fact.args[len(params) :]
                given = extra[0] if extra else None
            if given is None or given.keys is None:
                continue
            caller_path = site.path
            for key, held in given.keys.items():
                if held == MAYBE_CONFIG:
                    held = "config" if self._uses_config_library() else "other"
                elif held.startswith("ref:"):
                    held = self._built_kind(held[4:], caller_path)
                elif held.startswith("param:"):
                    # A parameter of the caller: what the caller's own callers pass.
                    held = self._parameter_kind(site.caller, held[6:]) or "other"
                merged.setdefault(key, held)
        return merged or None

    def _built_kind(self, written: str, path: str) -> str:
        """What a value built by a project name is, as a saved kind: an instance
        of a project nn.Module class is a "module"; what a project function
        returns, its own saved kind."""
        resolved = self.resolve(written, path)
        if resolved is None:
            return "other"
        klass = self.klass(resolved)
        if klass is not None:
            return "module" if klass.is_module else "object"
        function = self.function(resolved)
        returned = None if function is None else function.returns
        kinds = {F.MODULE: "module", F.OPTIMIZER: "optimizer", F.NAMESPACE: "namespace"}
        if returned is not None and returned.kind in kinds:
            return kinds[returned.kind]
        if returned is not None and (returned.origin or "").startswith("numpy."):
            return "array"
        return "other"

    def _parameter_kind(self, function_id: str, param: str) -> str | None:
        """What a function's parameter holds, from its callers; an argparse
        namespace by its name in a project that parses arguments."""
        passed = self._passed_kind(function_id, param)
        if passed is None and param in NAMESPACE_NAMES and self._parses_arguments():
            return "namespace"
        return passed

    def _parses_arguments(self) -> bool:
        return any("argparse" in summary.imports.values() for summary in self.summaries.values())

    def _passed_kind(self, function_id: str, param: str) -> str | None:
        """The saved kind ("module", "namespace", ...) a caller passes as ``param``."""
        fact = self.function(function_id)
        if fact is None:
            return None
        params = [p for p in fact.params if p not in {"self", "cls"}]
        kinds = {F.MODULE: "module", F.OPTIMIZER: "optimizer", F.NAMESPACE: "namespace"}
        for site in self.callers(function_id):
            passed = dict(zip(params, site.fact.args, strict=False))
            passed.update(site.fact.keywords)
            arg = passed.get(param)
            if arg is not None and arg.kind in kinds:
                return kinds[arg.kind]
        return None

    def loads(self) -> list[tuple[str, LoadFact]]:
        """Every ``torch.load`` of the project, with the file it is in."""
        return [(path, load) for path, summary in self.summaries.items() for load in summary.loads]

    def pickles_with(self) -> frozenset[str]:
        """The libraries any file of the project writes pickle files with."""
        return frozenset(lib for s in self.summaries.values() for lib in s.pickles_with)

    def written_for(self) -> frozenset[str]:
        """What any file shows of the library versions the project is written for."""
        return frozenset(mark for s in self.summaries.values() for mark in s.written_for)

    def torch_range(self, path: str) -> TorchRange:
        directory = PurePosixPath(path).parent
        while True:
            found = self.torch_ranges.get(str(directory))
            if found is not None:
                return found
            if directory == directory.parent:
                return TorchRange()
            directory = directory.parent

    def dependencies(self, path: str) -> frozenset[str]:
        """Files whose summaries can change what the rules see in ``path``: those it
        imports and those calling into it, transitively."""
        if path in self._dependencies:
            return self._dependencies[path]
        edges = self._edges()
        seen = {path}
        pending = [path]
        while pending:
            current = pending.pop()
            for other in edges.get(current, ()):
                if other not in seen:
                    seen.add(other)
                    pending.append(other)
        component = frozenset(seen)
        for member in component:
            self._dependencies[member] = component
        return component

    def _edges(self) -> dict[str, set[str]]:
        if not hasattr(self, "_edge_table"):
            table: dict[str, set[str]] = {path: set() for path in self.summaries}
            for module, importers in self._importers().items():
                for path in importers:
                    table[path].add(module)
                    table[module].add(path)  # callers see it too
            self._edge_table = table
        return self._edge_table

    def _importers(self) -> dict[str, set[str]]:
        """Each project file -> the project files that import it directly."""
        if not hasattr(self, "_importer_table"):
            table: dict[str, set[str]] = {path: set() for path in self.summaries}
            for path, summary in self.summaries.items():
                written = [*summary.imports.values(), *summary.star_imports]
                for name in written:
                    for candidate in _module_prefixes(name):
                        module = self.module_path(candidate, path)
                        if module is not None and module != path:
                            table[module].add(path)
                            break
            self._importer_table = table
        return self._importer_table

    def importers_fall_back_to_cpu(self, path: str) -> bool:
        """Whether a file that imports ``path`` directly runs without CUDA: it
        tests whether CUDA is there and calls ``.cuda()`` on no branch itself
        (one that does fails first, and is told so there)."""
        return any(
            CUDA_OPTIONAL in marks and CUDA_REQUIRED not in marks
            for marks in (
                self.summaries[importer].written_for for importer in self._importers().get(path, ())
            )
        )

    def import_seeds(self, path: str) -> frozenset[str]:
        """The seeding effects (``E.SEED``, ``E.SEEDS_TORCH``, ...) of the project
        files ``path`` imports, transitively. Importing a module runs its
        top-level code outside its ``__main__`` guard, and a seed set there
        holds for the importer: ``torch.manual_seed(0)`` at the top of
        ``simclr.py`` seeds the ``run.py`` that imports it."""
        imported: dict[str, set[str]] = {}
        for module, importers in self._importers().items():
            for importer in importers:
                imported.setdefault(importer, set()).add(module)
        found: set[str] = set()
        seen = {path}
        pending = list(imported.get(path, ()))
        while pending:
            module = pending.pop()
            if module in seen:
                continue
            seen.add(module)
            pending.extend(imported.get(module, ()))
            found |= self._top_level_seeds(module)
        return frozenset(found)

    def _top_level_seeds(self, path: str) -> set[str]:
        fact = self.function(f"{path}::{TOP_LEVEL}")
        if fact is None:
            return set()
        found = {
            effect
            for effect, _line, _col, branch in fact.events
            if effect in E.SEEDING and not _under_main_guard(branch)
        }
        for call in fact.calls:
            target = self.ref_target(call.ref, path, None)
            if target is not None and not _under_main_guard(call.branch):
                found |= self.effects(target) & E.SEEDING
        return found

    def importers_written_for(self, path: str) -> frozenset[str]:
        """What the files that import ``path`` directly show they are written for."""
        return frozenset(
            mark
            for importer in self._importers().get(path, ())
            for mark in self.summaries[importer].written_for
        )

    def digest(self, path: str, extra: str = "") -> str:
        """What the findings of ``path`` depend on: the summaries of the files it
        can see, the project's saves, the torch version; ``extra`` (the rules)."""
        digest = hashlib.sha256(extra.encode())
        digest.update(self._component_digest(self.dependencies(path)).encode())
        digest.update(repr(self.torch_range(path)).encode())
        return digest.hexdigest()

    def _component_digest(self, component: frozenset[str]) -> str:
        key = id(component)
        cached = self._component_digests.get(key)
        if cached is None:
            digest = hashlib.sha256()
            for member in sorted(component):
                digest.update(member.encode())
                digest.update(self._digests.get(member, "").encode())
            for _save_path, save in self.saves():
                digest.update(repr(save).encode())
            for load_path, load in self.loads():
                digest.update(f"{load_path}{load!r}".encode())
            digest.update(repr(self.process_group_optional()).encode())
            cached = self._component_digests[key] = digest.hexdigest()
        return cached

    def view(self, path: str) -> IndexView:
        from torchwise.review.index.view import IndexView

        return IndexView(self, path)


#: A test that chooses between a distributed and a single-process run.
DISTRIBUTED_CHOICE = re.compile(
    r"distributed|world_size|WORLD_SIZE|\bRANK\b|local_rank|LOCAL_RANK|ddp|\bgpus?\b|n_?gpus?|"
    r"num_gpus|multiprocessing|\bdist\b|dist_url|use_dist|nproc|\brank\b",
    re.IGNORECASE,
)


def _has_batchnorm(attribute: ArgFact | None, class_has_batchnorm: bool) -> bool:
    """Whether an attribute holds batch norm: its constructor says so, or it is an
    opaque container (``nn.Sequential(*resnet_children)``) in a class that has some."""
    if attribute is None:
        return class_has_batchnorm
    origin = attribute.origin or ""
    if "batchnorm" in attribute.flags or TORCHVISION_BN.match(origin) or BATCHNORM.match(origin):
        return True
    return class_has_batchnorm and ("opaque" in attribute.flags or not origin)


def _passed_as(call: CallFact, flag: str, callee: FunctionFact | None) -> str | None:
    """The callee's parameter that receives the caller's ``flag`` unchanged, if any."""
    if callee is None:
        return None
    params = [p for p in callee.params if p not in {"self", "cls"}]
    for position, arg in enumerate(call.args):
        if arg.name == flag and position < len(params):
            return params[position]
    for keyword, arg in call.keywords.items():
        if arg.name == flag:
            return keyword
    return None


def _module_name(path: str) -> str:
    pure = PurePosixPath(path)
    parts = [part for part in pure.with_suffix("").parts if part not in {"/", ""}]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _module_prefixes(written: str) -> list[str]:
    if written.startswith("<local>"):
        return []
    parts = written.split(".")
    leading = len(written) - len(written.lstrip("."))
    return [".".join(parts[:n]) for n in range(len(parts), leading, -1) if ".".join(parts[:n])]


def _shared_prefix(path: str, other: str) -> int:
    count = 0
    for a, b in zip(PurePosixPath(path).parts, PurePosixPath(other).parts, strict=False):
        if a != b:
            break
        count += 1
    return count


def _looks_like_model(layer: str) -> bool:
    """A constructor that may build a model with dropout or batch norm inside:
    ``timm.create_model``, ``AutoModel.from_pretrained``, a project class."""
    last = layer.rsplit(".", 1)[-1]
    return last[:1].isupper() or last in {"create_model", "from_pretrained", "build_model"}


def _under_main_guard(branch: list[tuple[str, bool]] | tuple[tuple[str, bool], ...]) -> bool:
    """Whether code on this branch runs only when its file is the program
    (``if __name__ == "__main__":``), not when it is imported."""
    return any("__name__" in test for test, _ in branch)
