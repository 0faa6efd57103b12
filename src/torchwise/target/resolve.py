"""``resolve_target``: a target string (plus options) -> a :class:`ResolvedTarget`.

The steps read top to bottom: find the configured entry (if the target names
one), make a :class:`Recipe` saying how to build the model (zoo, hub, a build
expression, or a class/factory/instance in a file or module), build it where
``build_on`` says, then materialise its inputs.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError
from torchwise.inputs import (
    InputSpec,
    batch_dim_of,
    make_inputs,
    parse_input_specs,
    spec_from_value,
)
from torchwise.target import loading
from torchwise.target.meta import REAL_BUILD_LIMIT, count_parameters, gib, params_on_meta
from torchwise.target.recipes import Recipe, is_path, recipe_for

if TYPE_CHECKING:
    import torch

BUILD_ON = ("auto", "meta", "cpu")


@dataclass
class ResolvedTarget:
    """A model ready to run, its example inputs, and how to write the same code again.

    ``model``, ``args`` and ``kwargs`` are what a command runs
    (``model(*args, **kwargs)``). The other fields say where the model came from,
    so a later command can write code that rebuilds it (a docstring's Example, a
    generated test)::

        import sys; sys.path.insert(0, str(rt.module_file.parent))  # file targets only
        from {rt.module} import {", ".join(rt.build_names)}
        model = {rt.build}          # or: model, example = ... when rt.returns_example

    - ``build``: a Python expression that builds the model when evaluated in the
      namespace of ``module``: the user's ``--build``/``build =`` text, or the
      call torchwise made (``Net(dim=8)``, ``make_net()``,
      ``LlamaForCausalLM(LlamaConfig(num_hidden_layers=2))``,
      ``create_model('resnet50', pretrained=False)``, ``resnet18()`` for the zoo),
      or the bare name of a module-level instance. None only if unknown.
    - ``module``: the importable name of that namespace (``"model"`` for
      ``model.py``, ``"mypkg.models"``, ``"transformers"``, ``"timm"``,
      ``"torchwise.zoo.resnet"``); ``module_file`` is the file for file targets,
      whose directory must be on ``sys.path`` for ``module`` to import.
    - ``build_names``: the names ``build`` takes from ``module``, in order.
    - ``returns_example``: ``build`` evaluates to ``(model, example_inputs)``
      (a factory that returns its own inputs).
    - ``input_specs``: one spec per forward argument, tuples and dicts included
      (``make_inputs(rt.input_specs)`` gives ``args, kwargs`` again);
      ``batch_dim``: which dim of the tensor inputs is the batch (``--batch-dim``,
      ``batch-dim =``, a dim named ``batch``, else 0).
    - ``origin``: ``"file"``, ``"module"``, ``"zoo"``, ``"hf"`` or ``"timm"``;
      ``config_name``: the ``[tool.torchwise.models.NAME]`` it came from.
    - ``built_on``: the device type of the parameters (``"meta"`` when built
      without memory); ``notes``: decisions the user should hear about.
    - ``init_kwargs``: the constructor (or config) arguments used.
    """

    model: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str
    cls: type | None
    source_file: Path | None
    input_specs: list[InputSpec] = field(default_factory=list)
    init_kwargs: dict[str, Any] = field(default_factory=dict)
    build: str | None = None
    module: str | None = None
    module_file: Path | None = None
    build_names: tuple[str, ...] = ()
    returns_example: bool = False
    batch_dim: int = 0
    origin: str = "file"
    config_name: str | None = None
    built_on: str = "cpu"
    notes: list[str] = field(default_factory=list)
    #: ``file.py:function`` that made the inputs (``--inputs-from``), if one did
    inputs_from: str | None = None

    def import_line(self) -> str | None:
        """``from model import GPT, GPTConfig``: what ``build`` needs, or None."""
        if not self.module or not self.build_names:
            return None
        return f"from {self.module} import {', '.join(self.build_names)}"


def resolve_target(
    target: str,
    *,
    inputs: Sequence[str] = (),
    init_kwargs: str | Mapping[str, Any] | None = None,
    build: str | None = None,
    build_on: str = "auto",
    batch_dim: int | None = None,
    config_start: Path | None = None,
    device: str = "cpu",
    inputs_from: str | None = None,
) -> ResolvedTarget:
    """Import/build the model a target names and materialise its inputs on ``device``.

    ``inputs`` are input-spec strings (each may hold several comma-separated
    arguments); without them the inputs come from the config entry, a factory's
    example inputs, or the zoo's/hub's defaults. ``build`` is a Python expression
    evaluated in the target module's namespace. ``build_on`` is ``"auto"``,
    ``"meta"`` (no memory; only when ``device`` is ``"meta"``, i.e. the command
    measures without running) or ``"cpu"``. ``auto`` builds zoo models on
    ``device``, and others for real unless they have more than
    :data:`REAL_BUILD_LIMIT` parameters (counted by a build on meta first), which
    stay on meta when ``device`` is meta and are refused otherwise.
    ``inputs_from`` (``file.py:make_inputs``) names a function whose return value is the
    inputs (a tensor, a tuple of arguments, a dict of keyword arguments or an
    ``(args, kwargs)`` pair): structured inputs a spec cannot describe, such as a
    graph's normalised adjacency matrix; it is called after the model is built.
    """
    if build_on not in BUILD_ON:
        raise TorchwiseError(f"--build-on must be one of {', '.join(BUILD_ON)}, not {build_on!r}")
    entry: dict[str, Any] = {}
    config_name = None
    if _is_config_name(target):
        config_name = target
        target, entry = _config_entry(target, config_start)
    specs = [s for text in (inputs or _listed(entry.get("inputs", entry.get("input")))) for s in
             parse_input_specs(text)]  # fmt: skip
    kwargs_obj = init_kwargs if init_kwargs is not None else entry.get("init-kwargs")
    build = build if build is not None else entry.get("build")
    if build_on == "auto" and isinstance(entry.get("build-on"), str):
        build_on = entry["build-on"]
    if batch_dim is None and entry.get("batch-dim") is not None:
        batch_dim = int(entry["batch-dim"])
    recipe = recipe_for(target, loading.parse_init_kwargs(kwargs_obj), build)
    factory = None
    if inputs_from is not None:
        if specs:
            raise TorchwiseError("give the inputs with --input or with --inputs-from, not both")
        factory = _input_factory(inputs_from)  # a typo costs no model build
    result, built_on, notes = _construct(recipe, target, build_on, device)
    model, example_specs, example = _split_example(result, recipe.label)
    returns_example = example_specs is not None
    if factory is not None:
        example_specs, example = _inputs_from(factory)
    if not specs:
        if example_specs is not None:
            specs = example_specs
        elif recipe.default_inputs is not None:
            specs = [s for text in recipe.default_inputs(model) for s in parse_input_specs(text)]
    if example is not None and specs is example_specs and device != "meta":
        import torch

        args, kwargs = example
        if torch.device(device).type != "cpu":
            args, kwargs = _moved((args, kwargs), torch.device(device))
    else:
        args, kwargs = make_inputs(specs, device=device)
    display = config_name or recipe.display or type(model).__name__
    check_inputs(model, display, args, kwargs)
    cls = recipe.cls if recipe.cls is not None and isinstance(model, recipe.cls) else type(model)
    return ResolvedTarget(
        model=model,
        args=args,
        kwargs=kwargs,
        name=display,
        cls=cls,
        source_file=_source_of(cls) or recipe.module_file,
        input_specs=specs,
        init_kwargs=loading.parse_init_kwargs(kwargs_obj),
        build=recipe.build,
        module=recipe.module,
        module_file=recipe.module_file,
        build_names=recipe.build_names,
        returns_example=returns_example,
        batch_dim=_batch_dim(batch_dim, specs, args, kwargs),
        origin=recipe.origin,
        config_name=config_name,
        built_on=built_on,
        notes=notes,
        inputs_from=inputs_from,
    )


# -- configured models ---------------------------------------------------------


def _is_config_name(target: str) -> bool:
    return ":" not in target and not target.endswith(".py") and "/" not in target


def _config_entry(name: str, config_start: Path | None) -> tuple[str, dict[str, Any]]:
    """``[tool.torchwise.models.NAME]`` -> (its target, its keys with dashes)."""
    from torchwise import zoo
    from torchwise.config import load_config

    config = load_config(config_start)
    models = config.get("models", {}) or {}
    if name not in models:
        where = f" in {config.path}" if config.path else " (no pyproject.toml found)"
        raise TorchwiseError(
            f"unknown target {name!r}: no [tool.torchwise.models.{name}]{where}",
            hint="a target is path/to/file.py:Name, package.module:Name, zoo:NAME, hf:NAME, "
            f"timm:NAME (zoo: {', '.join(zoo.names())}) or a configured model name",
        )
    raw = models[name]
    entry = {str(k).replace("_", "-"): v for k, v in raw.items()} if isinstance(raw, dict) else {}
    ref = entry.get("target")
    if not isinstance(ref, str) or (":" not in ref and not ref.endswith(".py")):
        raise TorchwiseError(
            f"[tool.torchwise.models.{name}] needs target = 'file.py:Name' (or zoo:, hf:, "
            "timm:, or 'file.py' with build = '...')"
        )
    module_ref, colon, attr = ref.rpartition(":") if ":" in ref else (ref, "", "")
    if is_path(module_ref) and config.root is not None:
        ref = f"{config.root / module_ref}{colon}{attr}"
    return ref, entry


def _listed(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


# -- building: on meta, for real, or refused -----------------------------------


def _construct(
    recipe: Recipe, target: str, build_on: str, device: str
) -> tuple[Any, str, list[str]]:
    """Build the recipe; (result, the device type its parameters are on, notes)."""
    import torch

    meta_ok = torch.device(device).type == "meta"
    if recipe.origin == "zoo":
        where = "meta" if build_on == "meta" else ("cpu" if build_on == "cpu" else device)
        if where == "meta" and not meta_ok:
            raise _meta_refused(target, device)
        assert recipe.make_on is not None
        return recipe.make_on(torch.device(where)), torch.device(where).type, []
    if recipe.prebuilt:
        if build_on == "meta":
            raise TorchwiseError(f"{recipe.label} is built at import; --build-on does not apply")
        return recipe.make(), _device_of(recipe.make()), []
    if build_on == "meta":
        if not meta_ok:
            raise _meta_refused(target, device)
        with params_on_meta():
            return recipe.make(), "meta", []
    if build_on == "auto":
        probe = _probe(recipe)
        if probe is not None:
            size = count_parameters(_module_of(probe))
            if size > REAL_BUILD_LIMIT:
                if meta_ok:
                    note = (
                        f"built on meta (no memory): {size:,} parameters would need "
                        f"{gib(size)} (--build-on cpu to build it for real)"
                    )
                    return probe, "meta", [note]
                raise TorchwiseError(
                    f"{target} has {size:,} parameters ({gib(size)} in float32); this command "
                    f"runs it for real, which is refused above {REAL_BUILD_LIMIT:,}",
                    hint="shrink it with --init-kwargs (fewer layers, a smaller width), or "
                    "measure it without memory: torchwise inspect/doc build it on meta",
                )
    result = recipe.make()
    if torch.device(device).type == "cuda":
        _module_of(result).to(device)
    return result, _device_of(result), []


def _meta_refused(target: str, device: str) -> TorchwiseError:
    return TorchwiseError(
        f"--build-on meta builds {target} without weights, but this command runs it on {device}",
        hint="use --build-on auto or cpu here; inspect and doc measure on meta",
    )


def _probe(recipe: Recipe) -> Any:
    """Build once on meta, output silenced, to learn the size; None if that fails."""
    try:
        with loading.silenced(), params_on_meta():
            return recipe.make()
    except Exception:
        return None  # code that cannot build on meta: the real build will say what is wrong


def _module_of(result: Any) -> torch.nn.Module:
    import torch

    if isinstance(result, tuple) and result and isinstance(result[0], torch.nn.Module):
        return result[0]
    if isinstance(result, torch.nn.Module):
        return result
    return torch.nn.Module()  # not a model: _split_example reports it


def _device_of(result: Any) -> str:
    first = next(iter(_module_of(result).parameters()), None)
    return "cpu" if first is None else first.device.type


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


# -- inputs ----------------------------------------------------------------------


@dataclass(frozen=True)
class _InputFactory:
    """``--inputs-from``'s function, found (not yet called)."""

    ref: str
    function: Any
    path: Path | None


def _input_factory(ref: str) -> _InputFactory:
    """Find the ``file.py:function`` (or ``package.module:function``) that makes the inputs."""
    module_ref, _, attr = ref.rpartition(":")
    if not module_ref or not attr:
        raise TorchwiseError(
            f"--inputs-from {ref!r} is not 'file.py:function' or 'package.module:function'",
            hint="e.g. --inputs-from graphs.py:make_inputs (a function with no arguments)",
        )
    if is_path(module_ref) and not Path(module_ref).is_file():
        raise TorchwiseError(f"--inputs-from {ref}: no file {module_ref}")
    module, path = loading.load_module(module_ref)
    function: Any = module
    for part in attr.split("."):
        if not hasattr(function, part):
            raise TorchwiseError(
                f"--inputs-from {ref}: {module_ref} has no {attr!r}",
                hint="name a function with no arguments that returns forward's inputs",
            )
        function = getattr(function, part)
    if not callable(function):
        raise TorchwiseError(
            f"--inputs-from {ref}: {attr} is not a function (it is {type(function).__name__})",
            hint="name a function with no arguments that returns forward's inputs",
        )
    return _InputFactory(ref, function, path)


def _inputs_from(factory: _InputFactory) -> tuple[list[InputSpec], tuple[Any, Any]]:
    """Call the function that makes the inputs; (their specs, (args, kwargs))."""
    import torch

    ref = factory.ref
    attr = ref.rpartition(":")[2]
    with loading.run_user_code(ref, f"calling {attr}() for the inputs", factory.path):
        value = factory.function()
    if isinstance(value, torch.Tensor):
        args: tuple[Any, ...] = (value,)
        kwargs: dict[str, Any] = {}
    elif isinstance(value, Mapping):
        args, kwargs = (), dict(value)
    elif (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], (tuple, list))
        and isinstance(value[1], Mapping)
    ):
        args, kwargs = tuple(value[0]), dict(value[1])
    elif isinstance(value, (tuple, list)):
        args, kwargs = tuple(value), {}
    else:
        raise TorchwiseError(
            f"--inputs-from {ref} returned {type(value).__name__}: return a tensor, a tuple of "
            "arguments, a dict of keyword arguments or an (args, kwargs) pair"
        )
    specs = [spec_from_value(a) for a in args]
    specs += [spec_from_value(v, name=k) for k, v in kwargs.items()]
    return specs, (args, kwargs)


def _moved(value: Any, device: torch.device) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_moved(v, device) for v in value)
    if isinstance(value, list):
        return [_moved(v, device) for v in value]
    if isinstance(value, dict):
        return {k: _moved(v, device) for k, v in value.items()}
    return value


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


def _batch_dim(
    explicit: int | None, specs: list[InputSpec], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> int:
    chosen = explicit if explicit is not None else batch_dim_of(specs)
    if chosen is None:
        return 0
    if chosen < 0:
        raise TorchwiseError(f"--batch-dim must be 0 or more, not {chosen}")
    first = _first_tensor((args, kwargs))
    if first is not None and first.ndim <= chosen:
        raise TorchwiseError(
            f"--batch-dim {chosen} is out of range for the first input ({first.ndim} dims)"
        )
    return chosen


def _first_tensor(value: Any) -> torch.Tensor | None:
    import torch

    if isinstance(value, torch.Tensor):
        return value
    parts = value.values() if isinstance(value, Mapping) else value
    if isinstance(value, (tuple, list, Mapping)):
        for part in parts:
            found = _first_tensor(part)
            if found is not None:
                return found
    return None


def _source_of(cls: type | None) -> Path | None:
    if cls is None:
        return None
    try:
        source = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None
    return Path(source) if source else None
