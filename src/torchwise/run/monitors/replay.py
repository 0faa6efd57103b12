"""Replays of the model's latest training forward, to answer what one run cannot show.

- :func:`influences_output`: does a module's output reach the model's output?
  The forward is replayed twice in eval mode without grad, the second time with
  the module's output perturbed; if the model's output moves, the module feeds
  it, so a module that gets no gradient had its gradient cut on the way
  (``.detach()``), not merely an output nobody uses.
- :func:`first_nonfinite_op`: which operation first produced a NaN or an inf?
  The forward is replayed (on a copy of the model when it can be copied) under
  a function mode that checks each result and keeps the first non-finite one
  whose inputs were finite, with the user's line.

The session is paused during a replay, so the monitors do not count it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from torchwise.run.monitors.loader import tensors_in
from torchwise.run.session import Session
from torchwise.run.sites import Site, user_site

Forward = tuple[nn.Module, tuple[Any, ...], dict[str, Any]]


@contextlib.contextmanager
def _replaying(session: Session, root: nn.Module, *, train: bool | None) -> Iterator[None]:
    """No grad, the RNG restored afterwards, and every module's mode restored."""
    modes = [(module, module.training) for module in root.modules()]
    previous = session.replaying
    session.replaying = True
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            if train is not None:
                for module, _ in modes:
                    module.training = train
            yield
    finally:
        for module, mode in modes:
            module.training = mode
        session.replaying = previous


def _floats(value: Any) -> list[torch.Tensor]:
    return [t for t in tensors_in(value, limit=32) if t.is_floating_point()]


def _perturbed(output: Any) -> Any:
    if isinstance(output, torch.Tensor):
        if not output.is_floating_point():
            return output
        scale = float(output.detach().abs().mean()) if output.numel() else 1.0
        return output + (scale or 1.0) * torch.randn_like(output)
    if isinstance(output, tuple) and not hasattr(output, "_fields"):
        return tuple(_perturbed(item) for item in output)
    if isinstance(output, list):
        return [_perturbed(item) for item in output]
    return output


def influences_output(session: Session, forward: Forward | None, module: nn.Module) -> bool:
    """Whether perturbing ``module``'s output changes the replayed model's output."""
    if forward is None:
        return False
    root, args, kwargs = forward
    if not any(m is module for m in root.modules()):
        return False
    try:
        with _replaying(session, root, train=False):
            base = _floats(root(*args, **kwargs))
            handle = module.register_forward_hook(lambda _m, _a, out: _perturbed(out))
            try:
                moved = _floats(root(*args, **kwargs))
            finally:
                handle.remove()
    except Exception:  # the replay is ours, not the script's: no answer
        return False
    return any(
        a.shape != b.shape or not torch.equal(a, b) for a, b in zip(base, moved, strict=False)
    )


class _FirstNonFinite(TorchFunctionMode):
    """Keeps the first torch function whose result is non-finite while its inputs are not."""

    def __init__(self) -> None:
        super().__init__()
        self.found: tuple[str, Site | None] | None = None

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        if self.found is None and _nonfinite(result) and not _nonfinite((args, kwargs)):
            name = getattr(func, "__qualname__", None) or getattr(func, "__name__", str(func))
            self.found = (str(name), user_site())
        return result


def _nonfinite(value: Any) -> bool:
    for tensor in tensors_in(value, limit=16):
        if tensor.is_floating_point() and tensor.numel() and not bool(torch.isfinite(tensor).all()):
            return True
    return False


def first_nonfinite_op(
    session: Session, forward: Forward | None
) -> tuple[str, Site | None, bool] | None:
    """(operation, user line, whether the model's output is finite) from a replay."""
    if forward is None:
        return None
    root, args, kwargs = forward
    with contextlib.suppress(Exception):
        root = copy.deepcopy(root)
    mode = _FirstNonFinite()
    try:
        with _replaying(session, root, train=None), mode:
            output = root(*args, **kwargs)
    except Exception:
        return None
    finite = not _nonfinite(output)
    if mode.found is None:
        return ("", None, finite)
    return (*mode.found, finite)
