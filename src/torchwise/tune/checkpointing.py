"""Activation checkpointing of a model's repeated blocks, on a private copy.

Checkpointing trades compute for memory: a checkpointed block keeps only its
inputs during the forward and recomputes its activations in the backward. It pays
off per *block* (a transformer layer, a ResNet stage's residual block), so the
blocks are found as experts pick them:

1. the most numerous user-defined module class that holds parameters and occurs
   at least twice without nesting (``Block`` in nanoGPT, ``BasicBlock`` in ResNet);
2. else the children with parameters of the largest ``nn.Sequential`` or
   ``nn.ModuleList``.

Each block's ``forward`` is replaced, on the copy only, by a call through
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` (the variant
PyTorch recommends: it supports keyword arguments and preserves the RNG state, so
dropout masks match the un-checkpointed step).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def find_blocks(model: nn.Module) -> tuple[str, list[str]]:
    """(description, qualified names of the blocks to checkpoint); empty when none fit."""
    modules = dict(model.named_modules())
    counts = Counter(
        type(m) for name, m in modules.items() if name and _user_defined(type(m)) and _has_params(m)
    )
    for cls, count in counts.most_common():
        if count < 2:
            break
        names = [n for n, m in modules.items() if n and type(m) is cls]
        outermost = [n for n in names if not any(n.startswith(o + ".") for o in names if o != n)]
        if len(outermost) >= 2:
            return f"{len(outermost)} {cls.__name__} blocks", outermost
    best: list[str] = []
    for name, m in modules.items():
        if isinstance(m, (nn.Sequential, nn.ModuleList)):
            children = [
                f"{name}.{c}" if name else c for c, sub in m.named_children() if _has_params(sub)
            ]
            if len(children) > len(best):
                best = children
    if len(best) >= 2:
        return f"{len(best)} children of a Sequential/ModuleList", best
    return "", []


def apply_checkpointing(model: nn.Module) -> list[str]:
    """Checkpoint the blocks :func:`find_blocks` picks; returns their names."""
    _, names = find_blocks(model)
    modules = dict(model.named_modules())
    for name in names:
        _wrap(modules[name])
    return names


def _wrap(block: nn.Module) -> None:
    original = block.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return original(*args, **kwargs)
        return checkpoint(original, *args, use_reentrant=False, **kwargs)

    block.forward = forward


def _user_defined(cls: type) -> bool:
    return not cls.__module__.startswith("torch.")


def _has_params(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())
