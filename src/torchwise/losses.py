"""Pick a loss and build labels that fit a model's output (shared by doctor and tune).

``auto`` chooses cross-entropy for classifier-shaped outputs (``(B, C)`` or
``(B, T, C)`` with ``C >= 2``), mean squared error otherwise, and follows the
target's dtype when the user gives one (integer class indices: cross-entropy;
floats of exactly 0 and 1: binary cross-entropy; other floats: MSE). Labels are
drawn from a private generator, never from the global RNG.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from torchwise.errors import TorchwiseError

LOSS_NAMES = ("auto", "ce", "mse", "bce")


@dataclass
class LossChoice:
    """The loss a check or a trial uses, the labels it uses it with, and why it was picked."""

    kind: str  # "ce" | "mse" | "bce" | "custom"
    name: str  # e.g. "cross_entropy over 10 classes (class dim -1)"
    reason: str
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    target: torch.Tensor
    num_classes: int | None = None
    class_dim: int = -1
    #: the classes are the batch's own samples (contrastive logits, sample i matches i)
    pairwise: bool = False

    @property
    def chance_loss(self) -> float | None:
        """Loss of a uniform prediction: ln(C) for cross-entropy, ln(2) for BCE."""
        if self.kind == "ce" and self.num_classes:
            return math.log(self.num_classes)
        if self.kind == "bce":
            return math.log(2.0)
        return None

    def describe(self) -> str:
        return f"{self.name} ({self.reason})"


def _ce(class_dim: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if class_dim in (-1, output.ndim - 1) and output.ndim > 2:
            # (B, T, C) -> (B*T, C) against (B*T,), as nanoGPT does
            return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
        return F.cross_entropy(output, target)

    return loss


def _bce(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(output, target)


def _mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(output, target)


def _load_custom(spec: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise TorchwiseError(
            f"--loss {spec!r} is not one of auto, ce, mse, bce or 'module:function'",
            hint="e.g. --loss torch.nn.functional:huber_loss",
        )
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise TorchwiseError(f"cannot load loss {spec!r}: {exc}") from exc
    if not callable(fn):
        raise TorchwiseError(f"loss {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


def check_loss(loss: str) -> None:
    """Raise now if ``loss`` names no loss: one of :data:`LOSS_NAMES` or a
    ``module:function`` that imports and is callable. Every front end calls it before
    the model runs, so a typo costs nothing (``choose_loss`` would find it only after a
    forward)."""
    if loss not in LOSS_NAMES:
        _load_custom(loss)


def choose_loss(
    output: torch.Tensor,
    loss: str = "auto",
    target: torch.Tensor | None = None,
    *,
    seed: int = 0,
) -> LossChoice:
    """Choose a loss for ``output`` (the model's primary output) and labels for it."""
    if not output.is_floating_point():
        raise TorchwiseError(
            f"the model's output is {output.dtype}, not floating point; training needs a "
            "differentiable output",
            hint="return logits or predictions from forward()",
        )
    gen = torch.Generator().manual_seed(seed)
    shape = tuple(output.shape)
    if target is not None:
        target = target.to(output.device)
    kind = loss
    reason = f"--loss {loss}"
    if loss == "auto":
        if target is not None:
            if not target.is_floating_point():
                kind, reason = "ce", "the target holds integer class indices"
            elif bool(((target == 0) | (target == 1)).all()):
                kind, reason = "bce", "the target holds only 0 and 1"
            else:
                kind, reason = "mse", "the target is real-valued"
        elif output.ndim in (2, 3) and shape[-1] >= 2:
            kind = "ce"
            reason = f"output {list(shape)} looks like class logits in the last dim"
        else:
            kind = "mse"
            reason = f"output {list(shape)} does not look like class logits"
    elif loss not in LOSS_NAMES:
        fn = _load_custom(loss)
        if target is None:
            target = torch.randn(shape, generator=gen).to(output.device, output.dtype)
        return LossChoice("custom", loss, "--loss", fn, target)

    if kind == "ce":
        class_dim = -1 if output.ndim <= 3 else 1
        if target is not None and target.ndim == output.ndim - 1 and output.ndim > 2:
            # a (B, H, W) target for a (B, C, H, W) output means classes in dim 1
            class_dim = 1 if tuple(target.shape) == shape[:1] + shape[2:] else -1
        if output.ndim < 2:
            raise TorchwiseError(
                f"cross-entropy needs an output with a class dim, got {list(shape)}",
                hint="use --loss mse or --loss bce",
            )
        num_classes = shape[class_dim]
        if target is None:
            label_shape = (
                shape[:class_dim] + shape[class_dim + 1 :] if class_dim == 1 else shape[:-1]
            )
            target = torch.randint(0, num_classes, label_shape, generator=gen)
            target = target.to(output.device)
            reason += "; random class labels"
        elif target.is_floating_point():
            raise TorchwiseError("--loss ce needs integer class indices as the target")
        target = target.long()
        name = f"cross_entropy over {num_classes} classes"
        return LossChoice("ce", name, reason, _ce(class_dim), target, num_classes, class_dim)
    if kind == "bce":
        if target is None:
            target = torch.randint(0, 2, shape, generator=gen).to(output.device, output.dtype)
            reason += "; random 0/1 labels"
        return LossChoice("bce", "binary_cross_entropy_with_logits", reason, _bce, target.float())
    if kind == "mse":
        if target is None:
            target = torch.randn(shape, generator=gen).to(output.device, output.dtype)
            reason += "; standard-normal targets"
        if tuple(target.shape) != shape:
            raise TorchwiseError(
                f"the target shape {list(target.shape)} does not match the output {list(shape)}"
            )
        return LossChoice("mse", "mse_loss", reason, _mse, target.to(output.dtype))
    raise TorchwiseError(f"unknown loss {loss!r}", hint="use auto, ce, mse, bce or module:fn")
