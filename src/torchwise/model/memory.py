"""Activation memory: live bytes of tensors created by ops, tracked per storage.

A tensor's memory belongs to its storage, which views share, so tracking is by
storage identity (``StorageWeakRef.cdata``): an op whose output aliases an input
allocates nothing; a storage is freed when its last reference dies. Parameters,
buffers and inputs are registered as pre-existing, so views of them are not
counted as activations. Works the same on meta tensors, where nothing is
really allocated but ``nbytes`` is still known.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch.multiprocessing.reductions import StorageWeakRef


class LiveBytes:
    """Running total and peak of bytes held by storages created since start."""

    def __init__(self, existing: Iterable[torch.Tensor] = ()) -> None:
        self._known: set[int] = set()
        self._live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.current = 0
        self.peak = 0
        for tensor in existing:
            self._known.add(_storage_key(tensor))

    def allocated(self, tensor: torch.Tensor) -> tuple[StorageWeakRef | None, int]:
        """Record ``tensor`` as an op output: its new storage (if any) and bytes."""
        if tensor.is_sparse or tensor.is_nested:
            return None, 0  # no single storage to attribute; rare in inspected models
        storage = tensor.untyped_storage()
        ref = StorageWeakRef(storage)  # type: ignore[no-untyped-call]
        if ref.cdata in self._known or ref.cdata in self._live:
            return None, 0
        nbytes = storage.nbytes()
        self._live[ref.cdata] = (ref, nbytes)
        self.current += nbytes
        self.peak = max(self.peak, self.current)
        return ref, nbytes

    def collect(self) -> None:
        """Drop storages whose last tensor died (called after every op)."""
        dead = [key for key, (ref, _) in self._live.items() if ref.expired()]  # type: ignore[no-untyped-call]
        for key in dead:
            self.current -= self._live.pop(key)[1]


def alive_bytes(allocations: list[tuple[StorageWeakRef, int]]) -> int:
    """Bytes of the storages in ``allocations`` that are still referenced."""
    total = 0
    for ref, nbytes in allocations:
        if not ref.expired():  # type: ignore[no-untyped-call]
            total += nbytes
    return total


def _storage_key(tensor: torch.Tensor) -> int:
    key: int = StorageWeakRef(tensor.untyped_storage()).cdata  # type: ignore[no-untyped-call]
    return key


#: Output-sized tensors alive at once when the backward starts, besides the output:
#: a cross-entropy loss keeps its log-probabilities for the backward, and the
#: backward makes their gradient and then the output's (measured on CPU with the
#: allocator's events: GPT-2 with a 50257-token vocabulary peaks at the estimate
#: plus three logits-sized tensors).
LOSS_BACKWARD_COPIES = 3

#: Optimizer state per trainable parameter, in parameter-sized tensors.
OPTIMIZER_STATES = {"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2}


@dataclass(frozen=True)
class TrainingMemory:
    """Estimated memory for one training step, in bytes."""

    weights: int
    gradients: int
    optimizer: dict[str, int]
    activations: int
    #: the loss's backward transient: :data:`LOSS_BACKWARD_COPIES` output-sized tensors
    loss_backward: int = 0

    def total(self, optimizer: str = "adam") -> int:
        return (
            self.weights
            + self.gradients
            + self.optimizer[optimizer]
            + self.activations
            + self.loss_backward
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "weights_bytes": self.weights,
            "gradients_bytes": self.gradients,
            "optimizer_state_bytes": dict(self.optimizer),
            "activations_bytes": self.activations,
            "loss_backward_bytes": self.loss_backward,
            "total_bytes": {name: self.total(name) for name in self.optimizer},
        }


def training_memory(
    param_bytes: int, trainable_bytes: int, activation_bytes: int, output_bytes: int = 0
) -> TrainingMemory:
    """Weights + gradients (trainable only) + optimizer state + saved activations + the
    loss's backward transient (:data:`LOSS_BACKWARD_COPIES` times the floating-point
    output's bytes).

    Gradients and optimizer state take the parameters' dtype (Adam keeps two
    moments, SGD with momentum one buffer, plain SGD none); mixed-precision
    master weights are not modelled.
    """
    return TrainingMemory(
        weights=param_bytes,
        gradients=trainable_bytes,
        optimizer={name: n * trainable_bytes for name, n in OPTIMIZER_STATES.items()},
        activations=activation_bytes,
        loss_backward=LOSS_BACKWARD_COPIES * output_bytes,
    )
