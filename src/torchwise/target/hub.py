"""``hf:NAME`` and ``timm:NAME``: models from the libraries' own classes, no hub access.

``hf:LlamaForCausalLM --init-kwargs '{"num_hidden_layers": 2}'`` builds
``LlamaForCausalLM(LlamaConfig(num_hidden_layers=2))``: the init kwargs set
fields of the model's config class (checked against the fields it has, since
Hugging Face configs silently keep any unknown keyword). A name transformers
lacks is looked up in diffusers, whose models take their config as keywords
(``hf:UNet2DModel``). ``timm:resnet50`` is ``timm.create_model("resnet50",
pretrained=False)``. Nothing is downloaded; weights are freshly initialised.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError, exception_line
from torchwise.target.loading import call_expression

if TYPE_CHECKING:
    import torch

#: Default sizes of the inputs made for a hub model when no --input is given.
DEFAULT_SEQ = 32
DEFAULT_AUDIO_SAMPLES = 16_000


@dataclass(frozen=True)
class HubModel:
    """How to build one hub model, and what to feed it by default."""

    origin: str  # "hf" or "timm"
    module: str  # "transformers", "diffusers" or "timm"
    cls: type | None
    make: Callable[[], Any]
    build: str
    build_names: tuple[str, ...]
    default_inputs: Callable[[torch.nn.Module], list[str]]


def _library(name: str, purpose: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if exc.name == name:
            raise TorchwiseError(
                f"{purpose} needs {name}, which is not installed",
                hint=f"pip install {name}",
            ) from None
        raise TorchwiseError(
            f"{name} is installed but cannot be imported: {exception_line(exc)}",
            hint=f"{name} needs {exc.name or 'a missing package'}; install the build made for "
            "your torch (PyPI's torchvision is a CUDA build that does not load next to a CPU "
            "torch)",
        ) from None
    except Exception as exc:  # e.g. a torchvision build that does not match torch
        raise TorchwiseError(
            f"{name} is installed but cannot be imported: {exception_line(exc)}",
            hint="its dependencies do not match your torch (for timm: torchvision must be "
            "the build made for this torch)",
        ) from None


def hf_model(name: str, init_kwargs: Mapping[str, Any]) -> HubModel:
    """``hf:NAME``: a transformers model class and its config class, or a diffusers model."""
    transformers = _library("transformers", f"hf:{name}")
    cls = _public_attr(transformers, name)
    if cls is None:
        diffusers = _diffusers()
        cls = _public_attr(diffusers, name) if diffusers is not None else None
        if cls is not None:
            return _diffusers_model(name, cls, init_kwargs)
        known = [n for n in dir(transformers) if n.endswith(("Model", "LM", "Head"))]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        raise TorchwiseError(
            f"hf:{name}: transformers has no model class {name!r}",
            hint=f"did you mean {', '.join(close)}?"
            if close
            else "e.g. hf:GPT2LMHeadModel, "
            "hf:LlamaForCausalLM, hf:BertModel (or a diffusers model such as hf:UNet2DModel)",
        )
    config_cls = getattr(cls, "config_class", None)
    if not isinstance(cls, type) or config_cls is None:
        raise TorchwiseError(f"hf:{name} is not a transformers model class with a config class")
    _check_config_fields(name, cls, config_cls, init_kwargs)
    config_name = config_cls.__name__
    build = call_expression(name, {}, call_expression(config_name, init_kwargs))

    def make() -> Any:
        return cls(config_cls(**init_kwargs))

    return HubModel(
        "hf", "transformers", cls, make, build, (name, config_name), _hf_inputs(cls, name)
    )


def _diffusers() -> Any:
    try:
        return importlib.import_module("diffusers")
    except Exception:
        return None


def _public_attr(module: Any, name: str) -> Any:
    if name.startswith("_"):
        return None
    try:
        return getattr(module, name)
    except (AttributeError, ImportError, RuntimeError):
        return None


def _diffusers_model(name: str, cls: Any, init_kwargs: Mapping[str, Any]) -> HubModel:
    build = call_expression(name, init_kwargs)

    def make() -> Any:
        return cls(**init_kwargs)

    def no_defaults(model: torch.nn.Module) -> list[str]:
        raise TorchwiseError(
            f"hf:{name} (diffusers) has no default inputs; describe forward's arguments",
            hint="e.g. --input 'f32[batch=2,3,32,32], i64[batch=2]<1000' for a UNet2DModel",
        )

    return HubModel("hf", "diffusers", cls, make, build, (name,), no_defaults)


def config_fields(config_cls: type) -> set[str]:
    """Every field a Hugging Face config class knows, under any of its names."""
    fields: set[str] = set()
    with_kwargs = False
    for param in inspect.signature(config_cls).parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            with_kwargs = True
        elif param.name != "self":
            fields.add(param.name)
    if dataclasses.is_dataclass(config_cls):
        fields |= {f.name for f in dataclasses.fields(config_cls)}
    fields |= set(getattr(config_cls, "attribute_map", {}) or {})
    # settable properties: num_labels sets id2label/label2id
    fields |= {
        name
        for name in dir(config_cls)
        if isinstance(getattr(config_cls, name, None), property)
        and getattr(config_cls, name).fset is not None
    }
    if with_kwargs or not fields:
        with contextlib.suppress(Exception):  # a config that needs arguments: keep the signature
            fields |= set(config_cls().to_dict())
    return fields


def keys_read_by(model_cls: type) -> set[str]:
    """The config keys a model's modeling code reads: ``config.head_dim`` and
    ``getattr(config, "head_dim", default)`` in the module that defines it.

    Hugging Face models read keys their config class does not declare (Qwen3-MoE's
    ``head_dim``, LeViT's ``down_ops``); a key the model reads is a key it honours.
    """
    import re

    try:
        source = inspect.getsource(inspect.getmodule(model_cls) or model_cls)
    except (OSError, TypeError):
        return set()
    keys = set(re.findall(r"\bconfig\.([A-Za-z_]\w*)", source))
    keys |= set(re.findall(r"getattr\(\s*(?:self\.)?config\s*,\s*[\"'](\w+)[\"']", source))
    return {key for key in keys if not key.startswith("_")}


def _check_config_fields(
    name: str, model_cls: type, config_cls: type, init_kwargs: Mapping[str, Any]
) -> None:
    fields = config_fields(config_cls)
    unknown = [key for key in init_kwargs if key not in fields]
    if unknown:
        unknown = [key for key in unknown if key not in keys_read_by(model_cls)]
    if unknown:
        known = fields | keys_read_by(model_cls)
        close = difflib.get_close_matches(unknown[0], sorted(known), n=3)
        raise TorchwiseError(
            f"hf:{name}: {config_cls.__name__} has no field {unknown[0]!r} and {name}'s code "
            "never reads it (Hugging Face configs would keep it silently and build the "
            "default size)",
            hint=f"did you mean {', '.join(close)}?" if close else None,
        )


def _hf_inputs(cls: type, name: str) -> Callable[[torch.nn.Module], list[str]]:
    def default_inputs(model: torch.nn.Module) -> list[str]:
        config = getattr(model, "config", None)
        main = getattr(cls, "main_input_name", "input_ids")
        if main == "input_ids":
            vocab = int(getattr(config, "vocab_size", 2) or 2)
            specs = [f"input_ids=i64[batch=1,seq={DEFAULT_SEQ}]<{vocab}"]
            if getattr(config, "is_encoder_decoder", False):
                specs.append(f"decoder_input_ids=i64[batch=1,seq={DEFAULT_SEQ}]<{vocab}")
            return specs
        if main == "pixel_values":
            channels = int(getattr(config, "num_channels", 3) or 3)
            size = getattr(config, "image_size", 224)
            h, w = (size, size) if isinstance(size, int) else tuple(size)[:2]
            return [f"pixel_values=f32[batch=1,{channels},{h},{w}]"]
        if main == "input_values":
            return [f"input_values=f32[batch=1,{DEFAULT_AUDIO_SAMPLES}]"]
        raise TorchwiseError(
            f"hf:{name} takes {main!r}, for which torchwise has no default input",
            hint=f"describe it with --input, e.g. --input '{main}=f32[2,...]'",
        )

    return default_inputs


def timm_model(name: str, init_kwargs: Mapping[str, Any]) -> HubModel:
    """``timm:NAME``: ``timm.create_model(NAME, pretrained=False, **init_kwargs)``."""
    timm = _library("timm", f"timm:{name}")
    if not timm.is_model(name):
        close = list(timm.list_models(f"*{name}*"))[:5] or difflib.get_close_matches(
            name, list(timm.list_models()), n=3
        )
        raise TorchwiseError(
            f"timm:{name}: timm has no model called {name!r}",
            hint=f"did you mean {', '.join(close)}?" if close else "see timm.list_models()",
        )
    kwargs = {"pretrained": False, **init_kwargs}
    build = call_expression("create_model", kwargs, repr(name))

    def make() -> Any:
        return timm.create_model(name, **kwargs)

    def default_inputs(model: torch.nn.Module) -> list[str]:
        cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None) or {}
        channels, height, width = tuple(cfg.get("input_size", (3, 224, 224)))
        return [f"f32[batch=1,{channels},{height},{width}]"]

    return HubModel("timm", "timm", None, make, build, ("create_model",), default_inputs)
