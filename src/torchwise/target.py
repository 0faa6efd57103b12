"""Targets and input specs: ``"file.py:Name"`` + ``"f32[8,3,32,32]"`` -> model, inputs.

Shared by every model command (inspect, doc, doctor). A *target* names a model:

- ``path/to/file.py:Name`` or ``package.module:Name`` (``Name`` may be dotted);
- ``zoo:NAME``, a reference model from :mod:`torchwise.zoo`;
- ``NAME`` from ``[tool.torchwise.models.NAME]`` in the nearest ``pyproject.toml``.

``Name`` may be an ``nn.Module`` subclass (built with ``init_kwargs`` or no
arguments), a module instance, or a factory returning a module or a
``(module, example_inputs)`` pair. An *input spec* describes one forward
argument (:mod:`torchwise.inputs`, re-exported here; grammar in docs/targets.md).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import re
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError
from torchwise.inputs import (
    DEFAULT_INT_BOUND,
    Dim,
    InputSpec,
    make_inputs,
    parse_input_spec,
    spec_from_value,
)

__all__ = [
    "DEFAULT_INT_BOUND",
    "Dim",
    "InputSpec",
    "ResolvedTarget",
    "check_inputs",
    "make_inputs",
    "parse_input_spec",
    "resolve_target",
    "spec_from_value",
]

if TYPE_CHECKING:
    import torch


#: Short and long dtype spellings -> the canonical short name.
@dataclass
class ResolvedTarget:
    """A model ready to run, its example inputs, and where it came from."""

    model: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str
    cls: type | None
    source_file: Path | None
    input_specs: list[InputSpec] = field(default_factory=list)
    init_kwargs: dict[str, Any] = field(default_factory=dict)

    def inputs_at(
        self, *, device: str | torch.device = "cpu", sizes: Mapping[str, int] | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Re-materialise the inputs, e.g. at another sequence length or on meta."""
        return make_inputs(self.input_specs, device=device, sizes=sizes)


@contextlib.contextmanager
def _on_sys_path(directory: Path) -> Iterator[None]:
    # A model file usually imports its siblings (``from layers import Block``).
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _import_error(where: str, exc: BaseException) -> TorchwiseError:
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if "importlib" not in f.filename]
    at = f" ({user[-1].filename}:{user[-1].lineno})" if user else ""
    line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return TorchwiseError(f"importing {where} failed{at}: {line}")


def _load_module(module_ref: str) -> tuple[Any, Path | None]:
    if module_ref.endswith(".py") or "/" in module_ref or "\\" in module_ref:
        path = Path(module_ref).resolve()
        if not path.is_file():
            raise TorchwiseError(f"model file not found: {module_ref}")
        stem = re.sub(r"\W", "_", path.stem)
        mod_name = f"_torchwise_target_{stem}_{abs(hash(str(path))):x}"
        if mod_name in sys.modules:
            return sys.modules[mod_name], path
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise TorchwiseError(f"cannot import {module_ref}: not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module  # dataclasses and pickling look modules up here
        with _on_sys_path(path.parent):
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                del sys.modules[mod_name]
                raise _import_error(module_ref, exc) from None
        return module, path
    with _on_sys_path(Path.cwd()):
        try:
            module = importlib.import_module(module_ref)
        except ModuleNotFoundError as exc:
            if exc.name and module_ref.startswith(exc.name):
                raise TorchwiseError(
                    f"no module named {module_ref!r}",
                    hint="use path/to/file.py:Name for a file, or install the package",
                ) from None
            raise _import_error(module_ref, exc) from None
        except Exception as exc:
            raise _import_error(module_ref, exc) from None
    source = getattr(module, "__file__", None)
    return module, Path(source) if source else None


def _candidates(module: Any) -> list[str]:
    import torch

    names = []
    for attr, value in vars(module).items():
        if attr.startswith("_"):
            continue
        is_cls = isinstance(value, type) and issubclass(value, torch.nn.Module)
        if is_cls and value.__module__ != module.__name__:
            continue  # imported, e.g. nn.Linear via ``from torch.nn import Linear``
        if is_cls or isinstance(value, torch.nn.Module):
            names.append(attr)
    return names


def _parse_init_kwargs(text: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return dict(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TorchwiseError(
            f"--init-kwargs is not valid JSON: {exc.msg} at column {exc.colno}",
            hint='example: --init-kwargs \'{"dim": 256, "depth": 4}\'',
        ) from None
    if not isinstance(value, dict):
        raise TorchwiseError("--init-kwargs must be a JSON object, e.g. '{\"dim\": 256}'")
    return value


def _call(obj: Any, label: str, init_kwargs: dict[str, Any]) -> Any:
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
    try:
        return obj(**init_kwargs)
    except Exception as exc:
        line = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise TorchwiseError(f"building {label}({init_kwargs or ''}) raised {line}") from None


def _split_example(value: Any, label: str) -> tuple[Any, list[InputSpec] | None, Any]:
    """A factory result -> (module, specs from its example inputs, (args, kwargs))."""
    import torch

    if isinstance(value, torch.nn.Module):
        return value, None, None
    if isinstance(value, tuple) and len(value) in (2, 3) and isinstance(value[0], torch.nn.Module):
        if len(value) == 3:
            args, kwargs = tuple(value[1]), dict(value[2])
        elif isinstance(value[1], torch.Tensor):
            args, kwargs = (value[1],), {}
        elif isinstance(value[1], Mapping):
            args, kwargs = (), dict(value[1])
        else:
            args, kwargs = tuple(value[1]), {}
        specs = [spec_from_value(a) for a in args]
        specs += [spec_from_value(v, name=k) for k, v in kwargs.items()]
        return value[0], specs, (args, kwargs)
    raise TorchwiseError(
        f"{label} returned {type(value).__name__}, not an nn.Module or (module, example_inputs)"
    )


def check_inputs(
    model: torch.nn.Module, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """A clear error when ``forward`` needs inputs the specs do not supply."""
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        given = len(args) + len(kwargs)
        raise TorchwiseError(
            f"inputs do not fit {name}.forward{signature}: {exc} ({given} input(s) given)",
            hint="describe each argument with --input, e.g. --input 'f32[8,3,32,32]' "
            "or --input 'mask=bool[8,128]' for a keyword (see docs/targets.md)",
        ) from None


def resolve_target(
    target: str,
    *,
    inputs: Sequence[str] = (),
    init_kwargs: str | None = None,
    config_start: Path | None = None,
    device: str = "cpu",
) -> ResolvedTarget:
    """Import/build the model a target names and materialise its inputs on ``device``.

    Inputs come from ``inputs`` (spec strings) when given, else from the config
    entry, the factory's example inputs, or the zoo entry's defaults. Zoo models
    are built directly on ``device`` (``"meta"`` builds a 70B model in no memory).
    """
    from torchwise import zoo
    from torchwise.config import load_config

    specs = [parse_input_spec(text) for text in inputs]
    kwargs_obj: str | Mapping[str, Any] | None = init_kwargs
    if target.startswith("zoo:"):
        entry = zoo.get(target[4:])
        model = entry.build(device=device, **_parse_init_kwargs(kwargs_obj))
        specs = specs or [parse_input_spec(s) for s in entry.inputs]
        args, kwargs = make_inputs(specs, device=device)
        check_inputs(model, target, args, kwargs)
        cls = type(model)
        return ResolvedTarget(
            model, args, kwargs, target, cls, _source_of(cls), specs, _parse_init_kwargs(kwargs_obj)
        )
    if ":" not in target:
        config = load_config(config_start)
        models = config.get("models", {}) or {}
        if target not in models:
            where = f" in {config.path}" if config.path else " (no pyproject.toml found)"
            raise TorchwiseError(
                f"unknown target {target!r}: no [tool.torchwise.models.{target}]{where}",
                hint="a target is path/to/file.py:Name, package.module:Name, zoo:NAME "
                f"(one of {', '.join(zoo.names())}) or a configured model name",
            )
        entry_cfg = models[target]
        ref = entry_cfg.get("target") if isinstance(entry_cfg, dict) else None
        if not isinstance(ref, str) or ":" not in ref:
            raise TorchwiseError(f"[tool.torchwise.models.{target}] needs target = 'file.py:Name'")
        if ref.startswith("zoo:"):
            return resolve_target(ref, inputs=inputs or _cfg_inputs(entry_cfg), device=device)
        module_ref, _, attr = ref.rpartition(":")
        if (module_ref.endswith(".py") or "/" in module_ref) and config.root is not None:
            module_ref = str(config.root / module_ref)
        inputs = inputs or _cfg_inputs(entry_cfg)
        specs = [parse_input_spec(text) for text in inputs]
        if kwargs_obj is None:
            kwargs_obj = entry_cfg.get("init-kwargs", entry_cfg.get("init_kwargs"))
        display = target
    else:
        module_ref, _, attr = target.rpartition(":")
        display = attr
    module, path = _load_module(module_ref)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            found = _candidates(module)
            raise TorchwiseError(
                f"{module_ref} has no attribute {attr!r}",
                hint=f"models it defines: {', '.join(found)}" if found else "it defines no models",
            )
        obj = getattr(obj, part)
    return _build(obj, attr, display, specs, _parse_init_kwargs(kwargs_obj), device, path)


def _cfg_inputs(entry: Mapping[str, Any]) -> list[str]:
    value = entry.get("inputs", entry.get("input", []))
    return [value] if isinstance(value, str) else list(value)


def _source_of(cls: type | None) -> Path | None:
    if cls is None:
        return None
    try:
        source = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None
    return Path(source) if source else None


def _build(
    obj: Any,
    attr: str,
    display: str,
    specs: list[InputSpec],
    init_kwargs: dict[str, Any],
    device: str,
    path: Path | None,
) -> ResolvedTarget:
    import torch

    example = None
    factory_specs: list[InputSpec] | None = None
    if isinstance(obj, torch.nn.Module):
        if init_kwargs:
            raise TorchwiseError(f"{attr} is a module instance; --init-kwargs does not apply")
        model, cls = obj, type(obj)
    elif isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        model, cls = _call(obj, attr, init_kwargs), obj
    elif callable(obj):
        model, factory_specs, example = _split_example(_call(obj, attr, init_kwargs), attr)
        cls = type(model)
        if not specs and factory_specs is not None:
            specs = factory_specs
    else:
        raise TorchwiseError(
            f"{attr} is a {type(obj).__name__}, not an nn.Module, a Module subclass or a factory"
        )
    if example is not None and specs is factory_specs and device == "cpu":
        args, kwargs = example
    else:
        if not specs:
            check_inputs(model, attr, (), {})  # forward() may need no inputs at all
        args, kwargs = make_inputs(specs, device=device)
    check_inputs(model, attr, args, kwargs)
    source = _source_of(cls) or path
    return ResolvedTarget(model, args, kwargs, display, cls, source, specs, init_kwargs)
