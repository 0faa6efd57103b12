"""What a model returned: the tensor doctor judges, the loss it computed, the output's kind.

The *primary* output is the tensor doctor computes its own loss on and compares
between runs: the tensor itself, ``out["logits"]``/``out.logits`` (Hugging Face),
or the first floating-point tensor of a tuple, list or dict. Its *kind* decides
the loss when the user gives none (:func:`auto_loss`):

- **pairwise** (contrastive): a ``(B, B)`` matrix over the batch (CLIP's
  ``logits_per_image``). Entry ``(i, j)`` compares sample i with sample j, so the
  matching pair of sample i is sample i: cross-entropy against ``arange(B)``, as
  CLIP trains, never against random classes.
- **forecast** (regression over a sequence): a ``(B, T, C)`` output whose last dim is
  the last dim of a floating-point input of the same rank (PatchTST predicting the
  input's channels): mean squared error, not C-way classification.
- otherwise the choice of :func:`torchwise.losses.choose_loss`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from torchwise.errors import TorchwiseError
from torchwise.losses import LossChoice, choose_loss
from torchwise.tensortree import tensors_in


def primary_output(out: Any) -> torch.Tensor:
    """The tensor doctor computes its own loss on and compares between runs."""
    if isinstance(out, torch.Tensor):
        return out
    logits = out.get("logits") if isinstance(out, Mapping) else getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    for tensor in tensors_in(out):
        if tensor.is_floating_point() and tensor.ndim > 0:
            return tensor
    raise TorchwiseError(
        f"the model returned {type(out).__name__} with no floating-point tensor in it",
        hint="doctor needs forward() to return a tensor, a tuple/dict of tensors or .logits",
    )


def returned_loss(out: Any) -> torch.Tensor | None:
    """The loss a model returned with its labels: ``out.loss``, ``out["loss"]``, or the
    0-d floating-point tensor of a tuple such as nanoGPT's ``(logits, loss)``."""
    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.ndim == 0 and loss.is_floating_point():
        return loss
    if isinstance(out, (tuple, list)):
        for item in out:
            if isinstance(item, torch.Tensor) and item.ndim == 0 and item.is_floating_point():
                return item
    return None


def is_pairwise(shape: tuple[int, ...], batch: int | None) -> bool:
    """A ``(B, B)`` output over a batch of ``B >= 2``: a similarity matrix between samples."""
    return batch is not None and batch >= 2 and len(shape) == 2 and shape == (batch, batch)


def is_forecast(output: torch.Tensor, inputs: Iterable[torch.Tensor]) -> bool:
    """``(B, T, C)`` whose ``C`` is the last dim of a float input of the same rank."""
    if output.ndim != 3:
        return False
    return any(
        t.is_floating_point() and t.ndim == 3 and t.shape[-1] == output.shape[-1] for t in inputs
    )


def auto_loss(
    output: torch.Tensor,
    inputs: list[torch.Tensor],
    batch: int | None,
    *,
    loss: str,
    target: torch.Tensor | None,
    seed: int,
) -> LossChoice:
    """The loss for ``output``, reading its kind first (see the module docstring)."""
    if loss == "auto" and target is None:
        if is_pairwise(tuple(output.shape), batch):
            assert batch is not None
            matches = torch.arange(batch, device=output.device)
            choice = choose_loss(output, "ce", matches, seed=seed)
            choice.name = f"cross_entropy over the batch's {batch} samples"
            choice.reason = (
                f"output {list(output.shape)} compares every sample with every other "
                "(contrastive logits): sample i matches sample i"
            )
            choice.pairwise = True
            return choice
        if is_forecast(output, inputs):
            choice = choose_loss(output, "mse", seed=seed)
            choice.reason = (
                f"output {list(output.shape)} predicts the last dim of a float input "
                "(a forecast), not class logits; standard-normal targets"
            )
            return choice
    return choose_loss(output, loss, target, seed=seed)
