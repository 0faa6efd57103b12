"""The project index as one file sees it: the answers to the engine's questions.

An :class:`IndexView` answers for the file being reviewed: what a call to a
project class or function returns, which class a written name resolves to and
what the index knows of it, a function's effects and callers, the values its
callers pass to each parameter, the project's ``torch.save`` sites and its
declared torch version (the questions are the engine's: see
:class:`torchwise.review.engine.view.ProjectView`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchwise.review.engine import facts as F
from torchwise.review.engine.facts import Value
from torchwise.review.engine.tensor_values import tensor_of_fact
from torchwise.review.engine.tensors import Place, TensorInfo
from torchwise.review.engine.view import ProjectView
from torchwise.review.index.project import ProjectIndex
from torchwise.review.index.records import CallSite, ClassModel, TorchRange

if TYPE_CHECKING:
    from torchwise.review.engine.context import Context
    from torchwise.review.index.records import ArgFact, FunctionFact, LoadFact, SaveFact


class IndexView(ProjectView):
    """The index as the file at ``path`` sees it."""

    def __init__(self, index: ProjectIndex, path: str) -> None:
        self.index = index
        self.path = path
        self._class_ids: dict[str, str | None] = {}

    # -- resolution used by the engine ----------------------------------------------
    def target(self, ref: list[str] | None) -> str | None:
        if ref is None:
            return None
        return self.index.ref_target(ref, self.path)

    def class_id(self, written: str | None) -> str | None:
        if written is None:
            return None
        if written not in self._class_ids:
            resolved = self.index.resolve(written, self.path)
            is_class = resolved is not None and self.index.klass(resolved) is not None
            self._class_ids[written] = resolved if is_class else None
        return self._class_ids[written]

    def klass(self, written: str | None) -> ClassModel | None:
        class_id = self.class_id(written)
        return None if class_id is None else self.index.klass(class_id)

    def placement(self, class_id: str) -> tuple[str, int] | None:
        return self.index.placement(class_id)

    def is_module_class(self, ctx: Context, written: str) -> bool:
        model = self.klass(written)
        return model is not None and model.is_module

    def value_of_call(self, ctx: Context, call: ast.Call) -> Value | None:
        """A call to a project class (an instance) or function (what it returns)."""
        from torchwise.review.index.summary import call_ref

        ref = call_ref(ctx, call)
        if ref is None:
            return None
        if ref[0] in {"written", "name"}:
            written = ref[1] if ref[0] == "written" else self._written_name(ref[1])
            model = self.klass(written)
            if model is not None:
                kind = F.MODULE if model.is_module else F.INSTANCE
                return Value(kind, origin=written, node=call)
        target = self.target(ref)
        fact = None if target is None else self.index.function(target)
        if fact is None or fact.returns is None:
            return None
        if fact.returns.kind is None:
            numpy = fact.returns.origin or ""
            # `return np.nanmean(iou)`: a NumPy value, as far as checkpoints care
            return Value(None, origin=numpy, node=call) if numpy.startswith("numpy.") else None
        returned = fact.returns
        origin = returned.origin
        if origin is not None and self.klass(origin) is None and target is not None:
            origin = _requalify(origin, target, self)
        tensor = None if target is None else self._returned_tensor(returned, target, call)
        items = None
        if returned.elements is not None and target is not None:
            items = tuple(self._item_value(item, target, call) for item in returned.elements)
        return Value(
            returned.kind,
            origin=origin,
            activation=returned.activation,
            node=call,
            tensor=tensor,
            items=items,
        )

    def _item_value(self, item: ArgFact, target: str, call: ast.Call) -> Value | None:
        """One item of a tuple a project function returns, as the call site sees it."""
        if item.kind is None and item.tensor is None:
            return None
        flags = frozenset({"guessed"}) if item.guessed else frozenset()
        return Value(
            item.kind,
            activation=item.activation,
            node=call,
            flags=flags,
            tensor=self._returned_tensor(item, target, call),
        )

    def _returned_tensor(self, returned: ArgFact, target: str, call: ast.Call) -> TensorInfo | None:
        """What the tensors a project function returns hold, as its summary says:
        where they live, their rank."""
        shape = tensor_of_fact(returned.tensor, "")
        if returned.tensor is None or not returned.tensor[0]:
            return shape
        device, line, why, nonscalar = returned.tensor[:4]
        path, _, qualname = target.partition("::")
        shown = qualname.rsplit(".", 1)[-1]
        place = Place(
            str(device),
            int(line),
            f"returned by `{shown}`: {why}",
            None if path == self.path else path,
        )
        container = returned.kind == F.TENSORS
        info = TensorInfo(place=place, batched=bool(nonscalar), container=container)
        if shape is not None:
            info = info.but(dims=shape.dims, unit_dim=shape.unit_dim)
        return info

    def _written_name(self, name: str) -> str:
        summary = self.index.summaries.get(self.path)
        if summary is not None and name in summary.imports:
            return summary.imports[name]
        return f"<local>.{name}"

    def output_activation(
        self, ctx: Context, model: Value
    ) -> tuple[str | None, tuple[str | None, int] | None]:
        """The activation a model's output ends in, and where it is applied: an
        ``nn.Sequential`` whose last layer is a softmax, or a project class whose
        forward returns one."""
        if model.activation is not None:
            line = getattr(model.node, "lineno", None)
            return model.activation, None if line is None else (None, line)
        klass = self.klass(model.origin)
        if klass is not None and len(klass.fact.returns) == 1:
            returned = klass.fact.returns[0]
            return returned.activation, self._where(klass, returned)
        return None, None

    def _where(self, klass: ClassModel, returned: ArgFact) -> tuple[str | None, int] | None:
        if returned.line is None:
            return None
        path = klass.id.partition("::")[0]
        return (None if path == self.path else path), returned.line

    def returns(self, written: str | None) -> list[tuple[ArgFact, tuple[str | None, int] | None]]:
        """What each element of a project model's ``forward`` return value holds."""
        klass = self.klass(written)
        if klass is None:
            return []
        return [(item, self._where(klass, item)) for item in klass.fact.returns]

    def star_names(self, written: str) -> dict[str, str] | None:
        """What ``from <written> import *`` binds, when it is a project module."""
        path = self.index.module_path(written, self.path)
        if path is None:
            return None
        return self.index.star_names(path)

    def call_target(self, ctx: Context, call: ast.Call) -> str | None:
        """The project function ``call`` runs, if it resolves."""
        from torchwise.review.index.summary import call_ref

        ref = call_ref(ctx, call)
        return None if ref is None else self.index.ref_target(ref, self.path)

    def parameter_values(self, function: F.FunctionFacts) -> dict[str, Value]:
        """What the project's call sites pass to each parameter, when they agree."""
        if function.target is None:
            return {}
        sites = self.index.callers(function.target)
        if not sites:
            return {}
        params = list(function.params)
        if function.class_name is not None and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        seen: dict[str, set[tuple[str | None, str | None, bool, tuple[str, ...]]]] = {}
        devices: dict[str, dict[tuple[str, bool] | None, TensorInfo]] = {}
        for site in sites:
            passed = dict(zip(params, site.fact.args, strict=False))
            passed.update(site.fact.keywords)
            for name in params:
                arg = passed.get(name)
                kind, origin, resolved = self._passed(arg, site.path)
                guessed = arg is not None and arg.guessed and not resolved
                flags = tuple(arg.flags) if arg is not None else ()
                seen.setdefault(name, set()).add((kind, origin, guessed, flags))
                tensor = _passed_tensor(arg, site, self.path)
                key = (
                    None
                    if tensor is None or tensor.place is None
                    else (
                        tensor.place.device,
                        tensor.nonscalar,
                    )
                )
                devices.setdefault(name, {}).setdefault(key, tensor or TensorInfo())
        values = {}
        for name, keys in seen.items():
            kinds = {kind for kind, _, _, _ in keys}
            agreed = devices.get(name, {})
            tensor = next(iter(agreed.values())) if len(agreed) == 1 else None
            if len(keys) == 1:
                kind, origin, guessed, flags = next(iter(keys))
                if kind is None and origin is not None and not guessed:
                    # A library object every caller passes (`gym.make(...)`): its maker.
                    values[name] = Value(None, origin=origin)
                elif kind is not None:
                    mark = {"guessed"} if guessed else set()
                    values[name] = Value(
                        kind,
                        origin=origin,
                        flags=frozenset({*flags, *mark}),
                        tensor=tensor if tensor is not None and tensor.place else None,
                    )
            elif kinds <= {F.MODULE, F.LOADED}:
                # Different models at different call sites: still a model, of no one class.
                guessed = all(g for _, _, g, _ in keys)
                values[name] = Value(F.MODULE, flags=frozenset({"guessed"} if guessed else ()))
        return values

    def _passed(self, arg: ArgFact | None, path: str) -> tuple[str | None, str | None, bool]:
        """(kind, origin usable from this file, whether the index resolved it) of a
        value passed at a call site. A value the caller's file got from another
        project file's function (``net = build_ssd(...)``: known there only by
        name) is what that function returns."""
        if arg is None:
            return None, None, False
        origin = arg.origin
        if origin is None or origin.startswith(("torch", "torchvision")):
            return arg.kind, origin, False
        resolved = self.index.resolve(origin, path)
        klass = None if resolved is None else self.index.klass(resolved)
        if klass is None and resolved is not None:
            returned = self.index.function(resolved)
            kind = None if returned is None or returned.returns is None else returned.returns.kind
            if kind is not None and returned is not None and returned.returns is not None:
                inner = returned.returns.origin
                again = None if inner is None else _requalify(inner, resolved, self)
                return kind, again, True
        if klass is None:
            # A library's name (`gym.make`) means the same everywhere; a project
            # name written in another file may not resolve from this one.
            return arg.kind, origin if resolved is None and "." in origin else None, False
        return (F.MODULE if klass.is_module else F.INSTANCE), f"<id>{resolved}", True

    # -- facts used by rules ----------------------------------------------------------
    def effects(self, target: str | None) -> frozenset[str]:
        if target is None:
            return frozenset()
        return self.index.effects(target)

    def function(self, target: str | None) -> FunctionFact | None:
        if target is None:
            return None
        return self.index.function(target)

    def trains_over(self, target: str | None, param: str) -> bool:
        return target is not None and self.index.trains_over(target, param)

    def callers(self, target: str | None) -> list[CallSite]:
        if target is None:
            return []
        return self.index.callers(target)

    def path_effects(self, target: str, flag: str, polarity: bool) -> frozenset[str]:
        return self.index.path_effects(target, flag, polarity)

    @property
    def torch_range(self) -> TorchRange:
        return self.index.torch_range(self.path)

    def saves(self) -> list[tuple[str, SaveFact]]:
        return self.index.saves()

    def loads(self) -> list[tuple[str, LoadFact]]:
        return self.index.loads()

    def written_for(self) -> frozenset[str]:
        return self.index.written_for()

    def importers_written_for(self) -> frozenset[str]:
        return self.index.importers_written_for(self.path)

    def import_seeds(self) -> frozenset[str]:
        return self.index.import_seeds(self.path)

    def importers_fall_back_to_cpu(self) -> bool:
        return self.index.importers_fall_back_to_cpu(self.path)

    def pickles_with(self) -> frozenset[str]:
        return self.index.pickles_with()

    def process_group_optional(self) -> str | None:
        return self.index.process_group_optional()


def _requalify(origin: str, target: str, view: IndexView) -> str | None:
    """A name written in another file, made resolvable from this one: keep it
    only when it resolves there to a project class (then use that class's id)."""
    index = view.index
    path = target.partition("::")[0]
    resolved = index.resolve(origin, path)
    if resolved is None or index.klass(resolved) is None:
        return None
    return f"<id>{resolved}"


def _passed_tensor(arg: ArgFact | None, site: CallSite, here: str) -> TensorInfo | None:
    """What a call site says of the tensor it passes (a loader's batches, a
    model's device, a tensor's), with the site named in the evidence."""
    if arg is None or arg.tensor is None or not arg.tensor[0]:
        return None
    device, line, why, nonscalar = arg.tensor[:4]
    path = None if site.path == here else site.path
    place = Place(str(device), int(line), f"passed by the caller: {why}", path)
    return TensorInfo(
        place=place,
        batched=bool(nonscalar),
        container=arg.kind in (F.LOADER, F.TENSORS),
    )
