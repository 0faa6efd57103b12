"""Snapshot and restore everything a check could change, so the caller's model and
process are exactly as they were before ``check()`` ran.

Covered: parameter and buffer values, ``.grad``, ``requires_grad``, the train/eval
flag of every submodule, every plain attribute of every submodule (hooks dicts
restored in place so the caller's hook handles keep working; plain tensor
attributes restored by value), torch/CUDA/numpy/python RNG states, the default
dtype, grad mode, deterministic-algorithms mode and the global module hooks.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _module_mod

# Global hook registries in torch.nn.modules.module (names differ across versions).
_GLOBAL_HOOK_DICTS = [
    name
    for name in dir(_module_mod)
    if name.startswith("_global_") and isinstance(getattr(_module_mod, name), dict)
]


def _clone(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


class Snapshot:
    """A restorable copy of a model's state and of the process's global torch state."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        seen: set[int] = set()
        self.values: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.grads: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        self.requires_grad: list[tuple[torch.Tensor, bool]] = []
        for tensor in [*model.parameters(), *model.buffers()]:
            if id(tensor) in seen:
                continue  # tied weights
            seen.add(id(tensor))
            self.values.append((tensor, _clone(tensor)))
            self.requires_grad.append((tensor, tensor.requires_grad))
            grad = tensor.grad
            self.grads.append((tensor, None if grad is None else _clone(grad)))
        self.modules: list[tuple[nn.Module, dict[str, Any], dict[str, Any]]] = []
        for module in model.modules():
            attrs = dict(vars(module))
            contents: dict[str, Any] = {}
            for key, value in attrs.items():
                if isinstance(value, dict):
                    contents[key] = dict(value)  # restored in place, see restore()
                elif isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                    contents[key] = _clone(value)
                elif isinstance(value, list):
                    contents[key] = list(value)
            self.modules.append((module, attrs, contents))
        self.torch_rng = torch.get_rng_state()
        self.cuda_rng = (
            torch.cuda.get_rng_state_all()
            if torch.cuda.is_available() and torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
            else None
        )
        self.python_rng = random.getstate()
        self.numpy_rng = _numpy_state()
        self.default_dtype = torch.get_default_dtype()
        self.grad_enabled = torch.is_grad_enabled()
        self.deterministic = torch.are_deterministic_algorithms_enabled()
        self.deterministic_warn = torch.is_deterministic_algorithms_warn_only_enabled()
        self.global_hooks = {name: dict(getattr(_module_mod, name)) for name in _GLOBAL_HOOK_DICTS}

    def restore(self, *, rng: bool = True) -> None:
        """Put everything back; ``rng=False`` leaves the RNG states as they are now."""
        for module, attrs, contents in self.modules:
            live = vars(module)
            for key in [k for k in live if k not in attrs]:
                del live[key]
            for key, value in attrs.items():
                live[key] = value
                saved = contents.get(key)
                if isinstance(value, dict) and isinstance(saved, dict):
                    if not _same_items(value, saved):
                        _refill(live, key, value, saved)
                elif isinstance(value, list) and isinstance(saved, list):
                    value[:] = saved
                elif isinstance(value, torch.Tensor) and isinstance(saved, torch.Tensor):
                    _copy_back(value, saved)
        for tensor, value in self.values:
            _copy_back(tensor, value)
        for tensor, flag in self.requires_grad:
            if tensor.requires_grad != flag and tensor.is_leaf:
                tensor.requires_grad_(flag)
        for tensor, grad in self.grads:
            tensor.grad = grad
        if rng:
            self._restore_rng()
        torch.set_default_dtype(self.default_dtype)
        torch.set_grad_enabled(self.grad_enabled)
        torch.use_deterministic_algorithms(self.deterministic, warn_only=self.deterministic_warn)
        for name, saved in self.global_hooks.items():
            live_hooks = getattr(_module_mod, name)
            live_hooks.clear()
            live_hooks.update(saved)

    def _restore_rng(self) -> None:
        torch.set_rng_state(self.torch_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)
        random.setstate(self.python_rng)
        if self.numpy_rng is not None:
            import numpy as np

            np.random.set_state(self.numpy_rng)


def _same_items(value: dict[Any, Any], saved: dict[Any, Any]) -> bool:
    """Same keys holding the very same objects (``==`` would compare tensors by value)."""
    return value.keys() == saved.keys() and all(value[k] is saved[k] for k in saved)


def _refill(live: dict[str, Any], key: str, value: dict[Any, Any], saved: dict[Any, Any]) -> None:
    """Put a changed dict attribute's contents back.

    Plain dicts (torch's hook dicts among them: the caller's handles point at them)
    are refilled in place. Any other mapping type is never mutated: a frozen one
    (diffusers' ``FrozenDict`` config) may let ``clear()`` through and then refuse
    ``update()``, which would leave the caller's object empty; it is replaced by a
    rebuilt copy, or left as it is when it cannot be rebuilt.
    """
    if type(value) in (dict, OrderedDict):
        value.clear()
        value.update(saved)
        return
    try:
        live[key] = type(value)(saved)
    except Exception:  # a mapping doctor can neither change nor rebuild: leave it
        return


def _copy_back(tensor: torch.Tensor, value: torch.Tensor) -> None:
    with torch.no_grad():
        same = (tensor.shape, tensor.dtype, tensor.device) == (
            value.shape,
            value.dtype,
            value.device,
        )
        if same:
            tensor.copy_(value)
        else:  # a check replaced the storage (e.g. resized it): put the original back
            tensor.data = value


def _numpy_state() -> Any:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is optional
        return None
    return np.random.get_state()
