"""What optional ``forward`` arguments change in what it returns.

:func:`~torchwise.doc.shapes.skeleton` records the output's structure with
``None`` members kept. When the output has ``None`` members,
:func:`optional_effects` runs the model once more per optional
argument (default ``None``, not given), with a tensor like the first input, and
records which outputs it changes: nanoGPT's ``targets`` turns the loss from
``None`` into a scalar and the logits from the last position to all of them.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchwise.doc.shapes import Runner, dtype_name

if TYPE_CHECKING:
    import torch

    from torchwise.console import ProgressHandle
    from torchwise.target import InputSpec


@dataclass
class OptionalEffect:
    """What passing an optional argument changes in the outputs (nanoGPT's ``targets``
    turns the ``None`` loss into a tensor and the logits from the last position to all)."""

    parameter: str
    #: output path -> (dtype, sizes) with it given, or None if that output is then None
    outputs: dict[str, tuple[str, list[int]] | None]
    #: the index of the input spec it was given like (a tensor of the same shape and dtype)
    like: int = 0


def _members(value: Any) -> dict[str, tuple[str, list[int]] | None]:
    """Top-level members of a tuple/list output (or the output itself): dtype and sizes."""
    import torch

    items = (
        {f"[{i}]": v for i, v in enumerate(value)}
        if isinstance(value, list | tuple) and not hasattr(value, "_fields")
        else {"output": value}
    )
    return {
        path: (dtype_name(v.dtype), list(v.shape)) if isinstance(v, torch.Tensor) else None
        for path, v in items.items()
    }


def has_none_member(tree: Any) -> bool:
    """Does a :func:`~torchwise.doc.shapes.skeleton` have a top-level ``None`` member?"""
    return (
        tree is not None
        and tree[0] in ("tuple", "list")
        and any(part[0] == "none" for part in tree[1])
    )


def optional_effects(
    model: torch.nn.Module,
    specs: Sequence[InputSpec],
    tree: Any,
    progress: ProgressHandle | None = None,
) -> list[OptionalEffect]:
    """Try each optional ``forward`` argument (default None, not given) with a tensor like
    the first input, when the output (``tree``, its skeleton) has None members: which
    outputs it changes. Runs nothing when there is no None member."""
    if not has_none_member(tree):
        return []
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    given = {spec.name for spec in specs if spec.name}
    positional = sum(1 for spec in specs if spec.name is None)
    order = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    given |= {p.name for p in order[:positional]}
    candidates = [
        p.name
        for p in params
        if p.default is None and p.name not in given
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]  # fmt: skip
    like_index = next((i for i, spec in enumerate(specs) if spec.kind == "tensor"), None)
    if not candidates or like_index is None:
        return []
    like = specs[like_index]
    runner = Runner(model, specs, progress)
    base = _members(runner.last_output)
    effects = []
    for name in candidates:
        if runner.run([*specs, dataclasses.replace(like, name=name)]) is None:
            continue
        changed = {
            path: member
            for path, member in _members(runner.last_output).items()
            if base.get(path) != member
        }
        if changed:
            effects.append(OptionalEffect(name, changed, like_index))
    return effects
