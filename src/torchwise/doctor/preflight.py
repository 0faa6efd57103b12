"""What doctor can tell about its options from the batch alone, before the model runs.

A bad option must cost nothing, and it must never read as a verdict on the model:
the loss must name a loss, the causal dim and the batch dim must exist in some input
tensor, and labels (``target``) must hold the batch's samples. :func:`validate_options`
is the one judge of that: :func:`~torchwise.doctor.check` calls it before its first
forward, and the front ends (``torchwise doctor``, ``torchwise tests``) call it before
they print anything. What only the output can tell (do the labels fit it under the
loss?) is judged by the context after its first forward.
"""

from __future__ import annotations

from typing import Any

import torch

from torchwise.doctor.options import Options
from torchwise.errors import TorchwiseError
from torchwise.losses import check_loss
from torchwise.tensortree import tensors_in


def validate_options(options: Options, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise one clear :class:`TorchwiseError` when ``options`` cannot apply to the batch
    ``model(*args, **kwargs)``; return quietly otherwise. Runs no model code except
    importing a ``module:function`` loss."""
    check_loss(options.loss)
    tensors = tensors_in((args, kwargs))
    if not tensors:
        raise TorchwiseError("doctor needs at least one input tensor")
    _check_causal_dim(options.causal_dim, tensors)
    batched = batched_input(tensors, options.batch_dim)
    if batched is not None and options.target is not None and options.batch_dim is not None:
        _check_label_batch(options.target, options.batch_dim, batched.shape[options.batch_dim])


def batched_input(tensors: list[torch.Tensor], batch_dim: int | None) -> torch.Tensor | None:
    """The first input tensor that has dim ``batch_dim`` (its size there is the batch);
    None when ``batch_dim`` is None (the inputs are one example); an error when no input
    has that dim."""
    if batch_dim is None:
        return None
    found = next((t for t in tensors if t.ndim > batch_dim), None)
    if found is None:
        ranks = ", ".join(f"{list(t.shape)}" for t in tensors[:4])
        raise TorchwiseError(
            f"doctor needs an input tensor with a batch dim (dim {batch_dim}; inputs {ranks})",
            hint="pass --batch-dim N when the batch is not dim 0, or --batch-dim none "
            "when the inputs are one example (a graph)",
        )
    return found


def _check_causal_dim(dim: int | None, tensors: list[torch.Tensor]) -> None:
    if dim is not None and not any(t.ndim > dim for t in tensors):
        ranks = ", ".join(f"{list(t.shape)}" for t in tensors[:4])
        raise TorchwiseError(
            f"--causal {dim} is beyond the inputs' dims (inputs {ranks}): no input has a "
            f"dim {dim} to be causal along",
            hint="give the time dim: 1 for (batch, seq) tokens, 0 for time-first inputs",
        )


def _check_label_batch(labels: torch.Tensor, batch_dim: int, batch: int) -> None:
    """Labels hold the batch's samples: ``(B, ...)`` rows, time-first ``(T, B, ...)`` with
    the batch where the inputs have it, or one per sample and position flattened
    (``(B*T,)``, for a model that flattens its logits). Any other leading size cannot
    label this batch, whatever the output turns out to be."""
    if labels.ndim == 0 or batch == 0 or labels.shape[0] % batch == 0:
        return
    if labels.ndim > batch_dim and labels.shape[batch_dim] == batch:
        return
    raise TorchwiseError(
        f"--target-spec {list(labels.shape)} cannot label the input's {batch} samples (its "
        f"dim {batch_dim}): it leads with {labels.shape[0]}, neither {batch} nor a multiple of it",
        hint=f"labels lead with the batch ('i64[{batch}]<10' class indices, (B, T) per token), "
        "sit where the input has it (T, B), or flatten the positions (B*T,)",
    )
