"""Operations a GPU runs nondeterministically, when the script asked for determinism (TWR503).

On the CPU these operations are deterministic, so a CPU run cannot show the
problem; under ``--as-cuda`` the simulated device knows which tensors would be
on the GPU. The table follows ``torch.use_deterministic_algorithms``'s own
documentation: with ``use_deterministic_algorithms(True)`` the operations of
:data:`RAISES` raise a ``RuntimeError`` on a GPU (an error: the run crashes on
the node); with only ``torch.backends.cudnn.deterministic = True`` they, and
those of :data:`SILENT`, give different results run to run (a hint: cuDNN's flag
does not cover them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from torchwise.findings import Severity
from torchwise.run.session import Session
from torchwise.run.sites import user_site

Condition = Callable[[tuple[Any, ...], dict[str, Any]], bool]


def _grad(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(args) and isinstance(args[0], torch.Tensor) and args[0].requires_grad


def _always(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return True


def _interpolate(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    mode = kwargs.get("mode", args[3] if len(args) > 3 else "nearest")
    return _grad(args, kwargs) and mode in ("linear", "bilinear", "bicubic", "trilinear")


def _reflect(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    mode = kwargs.get("mode", args[2] if len(args) > 2 else "constant")
    return _grad(args, kwargs) and mode in ("reflect", "replicate")


def _spatial(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(args) and isinstance(args[0], torch.Tensor) and args[0].dim() >= 3


def _float(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(args) and isinstance(args[0], torch.Tensor) and args[0].is_floating_point()


def _weighted(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return kwargs.get("weights", args[1] if len(args) > 1 else None) is not None


def _with_dim(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return "dim" in kwargs or len(args) > 1


def _max_mode(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return kwargs.get("mode", "mean") == "max" and _grad(args, kwargs)


_T = torch.Tensor
#: raise RuntimeError on a GPU under use_deterministic_algorithms(True)
RAISES: dict[Any, tuple[str, Condition]] = {
    F.adaptive_avg_pool2d: ("adaptive_avg_pool2d backward", _grad),
    F.adaptive_avg_pool3d: ("adaptive_avg_pool3d backward", _grad),
    F.adaptive_max_pool2d: ("adaptive_max_pool2d backward", _grad),
    F.avg_pool3d: ("avg_pool3d backward", _grad),
    F.max_unpool1d: ("max_unpool1d", _always),
    F.max_unpool2d: ("max_unpool2d", _always),
    F.max_unpool3d: ("max_unpool3d", _always),
    F.interpolate: ("interpolate (linear modes) backward", _interpolate),
    F.pad: ("reflection padding backward", _reflect),
    F.nll_loss: ("nll_loss on spatial outputs", _spatial),
    F.cross_entropy: ("cross_entropy on spatial outputs (nll_loss2d)", _spatial),
    F.ctc_loss: ("ctc_loss backward", _grad),
    F.embedding_bag: ("embedding_bag(mode='max') backward", _max_mode),
    F.grid_sample: ("grid_sample backward", _grad),
    torch.histc: ("histc", _always),
    torch.bincount: ("bincount with weights", _weighted),
    torch.median: ("median with indices", _with_dim),
    torch.cumsum: ("cumsum of floats", _float),
    _T.cumsum: ("cumsum of floats", _float),
}
#: nondeterministic on a GPU unless use_deterministic_algorithms(True) (which fixes them)
SILENT: dict[Any, tuple[str, Condition]] = {
    _T.index_add_: ("index_add_", _always),
    torch.index_add: ("index_add", _always),
    _T.scatter_add_: ("scatter_add_", _always),
    torch.scatter_add: ("scatter_add", _always),
    torch.gather: ("gather backward", _grad),
    torch.index_select: ("index_select backward", _grad),
    _T.index_copy_: ("index_copy_", _always),
    torch.repeat_interleave: ("repeat_interleave backward", _grad),
}


class DeterminismJudge:
    """Checks each function the device mode sees against the tables."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def check(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], devices: set[Any]
    ) -> None:
        if not any(str(d).startswith("cuda") for d in devices):
            return
        strict = torch.are_deterministic_algorithms_enabled()
        asked = strict or bool(torch.backends.cudnn.deterministic)
        if not asked:
            return
        func = getattr(func, "__wrapped__", func)  # torchwise's own loss wrappers
        entry = RAISES.get(func)
        raises = entry is not None
        if entry is None and not strict:
            entry = SILENT.get(func)
        if entry is None:
            return
        name, condition = entry
        try:
            applies = condition(args, kwargs)
        except (IndexError, TypeError):
            applies = False
        if not applies:
            return
        if strict and raises and not torch.is_deterministic_algorithms_warn_only_enabled():
            self.session.report(
                "TWR503",
                user_site(),
                f"{name} has no deterministic CUDA implementation: with "
                "torch.use_deterministic_algorithms(True) it raises a RuntimeError on a GPU",
                severity=Severity.ERROR,
            )
        elif not strict:
            self.session.report(
                "TWR503",
                user_site(),
                f"{name} is nondeterministic on a GPU, and torch.backends.cudnn.deterministic "
                "does not cover it: seeded runs still differ",
                severity=Severity.INFO,
            )

    def finish(self) -> None:
        pass
