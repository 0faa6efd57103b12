"""``--optimizer adamw:lr=3e-4,weight_decay=0.1`` -> a recipe for a fresh optimizer.

Every arm of a trial needs its own optimizer over its own copy of the model, so
the spec is kept as a recipe (class + keyword arguments) and built per copy, with
the implementation knobs (``foreach``, ``fused``, ``capturable``) added only when
the class accepts them.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from torchwise.errors import TorchwiseError

#: Lower-case spellings users type -> torch.optim class names.
_BUILTIN = {
    name.lower(): name
    for name in (
        "SGD",
        "Adam",
        "AdamW",
        "Adagrad",
        "Adadelta",
        "Adamax",
        "NAdam",
        "RAdam",
        "RMSprop",
        "ASGD",
        "Rprop",
        "Adafactor",
    )
}


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer class and the keyword arguments the user gave it."""

    cls: type[torch.optim.Optimizer]
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        module = self.cls.__module__
        if module.startswith("torch.optim"):
            return f"torch.optim.{self.cls.__name__}"
        return f"{module}.{self.cls.__name__}"

    def accepts(self, argument: str) -> bool:
        try:
            return argument in inspect.signature(self.cls.__init__).parameters
        except (TypeError, ValueError):
            return False

    def call_text(self, params: str = "model.parameters()", **extra: Any) -> str:
        """The constructor call as source: ``torch.optim.AdamW(model.parameters(), lr=0.001)``."""
        kwargs = {**self.kwargs, **extra}
        args = ", ".join([params, *(f"{k}={v!r}" for k, v in kwargs.items())])
        return f"{self.name}({args})"

    def build(self, params: Iterable[torch.nn.Parameter], **extra: Any) -> torch.optim.Optimizer:
        """A new optimizer; ``extra`` are implementation switches like ``fused=True``."""
        for key in extra:
            if not self.accepts(key):
                raise TorchwiseError(f"{self.name} has no {key!r} option")
        try:
            return self.cls(params, **{**self.kwargs, **extra})
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TorchwiseError(f"building {self.call_text(**extra)} failed: {exc}") from None


def parse_optimizer(text: str) -> OptimizerSpec:
    """``NAME[:key=value,...]``: NAME is a torch.optim class (any case) or ``module.Class``."""
    name, _, options = text.partition(":")
    name = name.strip()
    cls = _resolve_class(name)
    kwargs = _parse_options(options, text) if options.strip() else {}
    if cls is torch.optim.LBFGS:
        raise TorchwiseError("LBFGS needs a closure per step; tune supports single-step optimizers")
    try:
        inspect.signature(cls).bind(None, **kwargs)
    except TypeError as exc:
        raise TorchwiseError(f"--optimizer {text!r}: {exc}") from None
    return OptimizerSpec(cls, kwargs)


def _resolve_class(name: str) -> type[torch.optim.Optimizer]:
    if name.lower() in _BUILTIN and hasattr(torch.optim, _BUILTIN[name.lower()]):
        return getattr(torch.optim, _BUILTIN[name.lower()])  # type: ignore[no-any-return]
    if name.lower() == "lbfgs":
        return torch.optim.LBFGS
    module_name, _, attr = name.rpartition(".")
    if not module_name:
        known = ", ".join(sorted(_BUILTIN))
        raise TorchwiseError(f"unknown optimizer {name!r}", hint=f"one of {known}, or module.Class")
    try:
        value = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise TorchwiseError(f"cannot load optimizer {name!r}: {exc}") from None
    if not (isinstance(value, type) and issubclass(value, torch.optim.Optimizer)):
        raise TorchwiseError(f"{name} is not a torch.optim.Optimizer subclass")
    return value


def _parse_options(options: str, text: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for item in _split_top_level(options):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise TorchwiseError(
                f"--optimizer {text!r}: expected key=value, got {item.strip()!r}",
                hint="e.g. --optimizer 'adamw:lr=3e-4,weight_decay=0.1,betas=(0.9,0.95)'",
            )
        try:
            kwargs[key] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise TorchwiseError(
                f"--optimizer {text!r}: {key}={value.strip()} is not a Python literal"
            ) from None
    return kwargs


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets: ``lr=1e-3,betas=(0.9,0.95)`` -> two items."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return [item for item in items if item.strip()]
