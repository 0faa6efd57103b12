"""The project's models, as a tester sees them: which module class of the
reviewed files is the model (not one of its parts), how to name it on the
command line and what example input its first layer asks for."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from torchwise.review.index.project import ProjectIndex
from torchwise.review.index.records import ClassModel


@dataclass(frozen=True)
class MainModel:
    """The model to test: its class id, the CLI target, and what to add to it."""

    id: str
    command: str  # "models/net.py:Net --input 'f32[batch=8,3,32,32]'"
    note: str  # "" or " (give its input with `--input`: ...)"


def main_model(index: ProjectIndex, reviewed: set[str]) -> MainModel | None:
    """The model of the reviewed files a tester would start with: the module class
    the project builds most often that is not a part of another, with the command
    that names it (``file.py:Class --input 'spec'``) and a note on what it lacks."""
    candidates = _model_classes(index, reviewed)
    parts = _parts(index, candidates)
    whole = [model for model in candidates if model.id not in parts] or candidates
    if not whole:
        return None
    built = _instantiations(index)
    model = max(
        whole, key=lambda m: (built.get(m.id, 0), m.fact.init_required == 0, len(m.fact.layers))
    )
    path, _, name = model.id.partition("::")
    command = f"{_relative(path)}:{name}"
    note = ""
    spec = input_spec(_first_layer(index, model))
    if spec is not None:
        command += f" --input '{spec}'"
    else:
        note = " (give its input with `--input`: its first layer does not say)"
    if model.fact.init_required:
        note += f" ({name}() takes arguments: add `--init-kwargs` or `--build`)"
    return MainModel(model.id, command, note)


def _model_classes(index: ProjectIndex, reviewed: set[str]) -> list[ClassModel]:
    found = []
    for path in sorted(reviewed):
        summary = index.summaries.get(path)
        if summary is None:
            continue
        for name in summary.classes:
            model = index.klass(f"{path}::{name}")
            if model is not None and model.is_module and model.fact.layers:
                found.append(model)
    return found


def _parts(index: ProjectIndex, models: list[ClassModel]) -> set[str]:
    """Classes the others are built from (blocks, heads): not the model to test."""
    found = set()
    for model in models:
        path = model.id.partition("::")[0]
        for layer in model.fact.layers:
            resolved = index.resolve(layer, path)
            if resolved is not None and resolved != model.id:
                found.add(resolved)
    return found


def _first_layer(index: ProjectIndex, model: ClassModel) -> list[str | int]:
    """The model's first input layer; through a part of the project's own
    (``ConvBlock(3, 32)`` whose first layer is a ``Conv2d``), with the part's arguments."""
    first = list(model.fact.first_layer)
    if first and not str(first[0]).startswith("torch.nn."):
        path = model.id.partition("::")[0]
        resolved = index.resolve(str(first[0]), path)
        part = None if resolved is None else index.klass(resolved)
        if part is not None and part.fact.first_layer:
            return [part.fact.first_layer[0], *first[1:]]
        return []
    return first


def _instantiations(index: ProjectIndex) -> Counter[str]:
    """How often the project builds each class (calls to its constructor)."""
    count: Counter[str] = Counter()
    for path, summary in index.summaries.items():
        for fact in summary.functions.values():
            for call in fact.calls:
                target = index.ref_target(call.ref, path, fact.class_name)
                if target is not None and target.endswith(".__init__"):
                    count[target.removesuffix(".__init__")] += 1
    return count


def input_spec(first_layer: list[str | int]) -> str | None:
    """An example input for a model from its first layer: `f32[batch=8,3,32,32]`."""
    if not first_layer:
        return None
    layer, numbers = str(first_layer[0]), [n for n in first_layer[1:] if isinstance(n, int)]
    size = numbers[0] if numbers else None
    if size is None:
        return None
    kind = layer.rsplit(".", 1)[-1]
    if kind == "Conv2d":
        side = 28 if size == 1 else 32
        return f"f32[batch=8,{size},{side},{side}]"
    if kind == "Conv1d":
        return f"f32[batch=8,{size},128]"
    if kind == "Conv3d":
        return f"f32[batch=8,{size},8,32,32]"
    if kind == "Linear":
        return f"f32[batch=8,{size}]"
    if kind == "Embedding":
        return f"i64[batch=8,seq=32]<{size}"
    if kind in {"LSTM", "GRU", "RNN"}:
        return f"f32[16,batch=8,{size}]"  # (seq, batch, features): batch_first is off by default
    return None


def _relative(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path
