"""How to build each kind of target, decided before anything is built.

A :class:`Recipe` holds a ``make()`` that builds the model (or ``(model, example
inputs)``) plus what is known about it up front: the build expression and the
module it evaluates in, the class, default inputs. The resolver decides *where*
to run ``make()`` (on meta, for real, or not at all).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError
from torchwise.target import hub, loading

if TYPE_CHECKING:
    import torch


@dataclass
class Recipe:
    """How to build a target's model: what the resolver knows before building it."""

    make: Callable[[], Any]  # builds the model, or (model, example inputs)
    label: str  # for messages: "Net(dim=8)"
    origin: str
    module: str | None
    module_file: Path | None = None
    build: str | None = None
    build_names: tuple[str, ...] = ()
    cls: type | None = None
    display: str | None = None
    prebuilt: bool = False  # a module-level instance: nothing to build
    make_on: Callable[[torch.device], Any] | None = None  # zoo: builds directly on a device
    default_inputs: Callable[[torch.nn.Module], list[str]] | None = None


def is_path(module_ref: str) -> bool:
    return module_ref.endswith(".py") or "/" in module_ref or "\\" in module_ref


def recipe_for(target: str, init_kwargs: dict[str, Any], build: str | None) -> Recipe:
    scheme, _, rest = target.partition(":")
    if scheme in ("zoo", "hf", "timm") and build is not None:
        raise TorchwiseError(f"--build does not apply to {scheme}: targets; use --init-kwargs")
    if scheme == "zoo":
        return _zoo_recipe(rest, init_kwargs)
    if scheme in ("hf", "timm"):
        model = (hub.hf_model if scheme == "hf" else hub.timm_model)(rest, init_kwargs)
        return Recipe(
            make=model.make, label=model.build, origin=model.origin, module=model.module,
            build=model.build, build_names=model.build_names, cls=model.cls, display=target,
            default_inputs=model.default_inputs,
        )  # fmt: skip
    if ":" in target:
        module_ref, _, attr = target.rpartition(":")
    elif target.endswith(".py") and build is not None:
        module_ref, attr = target, ""
    else:
        raise TorchwiseError(
            f"target {target!r} names a file but no model in it",
            hint=f"use {target}:ClassName, or give --build 'Model(Config())'",
        )
    return _module_recipe(module_ref, attr, init_kwargs, build)


def _zoo_recipe(name: str, init_kwargs: dict[str, Any]) -> Recipe:
    from torchwise import zoo

    entry = zoo.get(name)
    options = {**entry.options, **init_kwargs}
    builder = entry.builder.__name__
    return Recipe(
        make=lambda: entry.build(**init_kwargs), label=f"zoo:{entry.name}", origin="zoo",
        make_on=lambda device: entry.build(device=device, **init_kwargs),
        module=entry.builder.__module__, build=loading.call_expression(builder, options),
        build_names=(builder,), display=f"zoo:{name}",
        default_inputs=lambda model: list(entry.inputs),
    )  # fmt: skip


def _module_recipe(
    module_ref: str, attr: str, init_kwargs: dict[str, Any], build: str | None
) -> Recipe:
    module, path = loading.load_module(module_ref)
    is_file = is_path(module_ref)
    import_name = path.stem if is_file and path is not None else module_ref
    common: dict[str, Any] = {
        "origin": "file" if is_file else "module",
        "module": import_name,
        "module_file": path if is_file else None,
    }
    named = loading.lookup(module, module_ref, attr) if attr else None
    named_cls = named if isinstance(named, type) else None
    if build is not None:
        if init_kwargs:
            raise TorchwiseError(
                "--init-kwargs does not apply with --build; write the arguments into the expression"
            )
        expression = build.strip()
        loading.compile_build(expression)  # a syntax error is reported before anything runs
        return Recipe(
            make=lambda: loading.evaluate_build(expression, module, module_ref, path),
            label=expression, build=expression, cls=named_cls, display=attr or None,
            build_names=loading.free_names(expression, vars(module)), **common,
        )  # fmt: skip
    import torch

    if isinstance(named, torch.nn.Module):
        if init_kwargs:
            raise TorchwiseError(f"{attr} is a module instance; --init-kwargs does not apply")
        return Recipe(
            make=lambda: named, label=attr, build=attr, cls=type(named), display=attr,
            prebuilt=True, build_names=loading.free_names(attr, vars(module)), **common,
        )  # fmt: skip
    if not callable(named):
        raise TorchwiseError(
            f"{attr} is a {type(named).__name__}, not an nn.Module, a Module subclass or a factory"
        )
    expression = loading.call_expression(attr, init_kwargs)
    return Recipe(
        make=lambda: _call(named, attr, init_kwargs, module_ref, path), label=attr,
        build=expression, cls=named_cls, display=attr,
        build_names=loading.free_names(expression, vars(module)), **common,
    )  # fmt: skip


def _call(obj: Any, label: str, init_kwargs: dict[str, Any], where: str, path: Path | None) -> Any:
    try:
        signature = inspect.signature(obj)
        signature.bind(**init_kwargs)
    except TypeError as exc:
        raise TorchwiseError(
            f"cannot build {label} with {init_kwargs}: {exc}",
            hint=f"its signature is {label}{signature}; pass --init-kwargs as JSON",
        ) from None
    except ValueError:
        pass  # no introspectable signature (builtins): just try the call
    with loading.run_user_code(where, f"building {loading.call_expression(label, init_kwargs)}",
                               path):  # fmt: skip
        return obj(**init_kwargs)
