"""``torchwise ckpt inspect``: what is in a checkpoint, read without executing it.

Walks the symbolically rebuilt object graph of the pickle ``torch.load`` would
unpickle (or a safetensors header), lists every tensor by dotted key, sums
parameters, buffers and optimizer state, and summarises the non-tensor
structure (epoch, optimizer hyperparameters, Lightning metadata, ...).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from torchwise.ckpt.budgets import DEFAULT_BUDGETS, Budgets
from torchwise.ckpt.formats.container import Container
from torchwise.ckpt.loaders.routes import read_container
from torchwise.ckpt.loaders.torch_load import corrupt, readable
from torchwise.ckpt.tensors import SAFETENSORS_DTYPES, TensorRecord, pt2_tensors, tar_tensors
from torchwise.ckpt.walk import BUFFER_NAMES, OptimizerSummary, TensorEntry, Walker
from torchwise.errors import TorchwiseError

__all__ = ["BUFFER_NAMES", "InspectResult", "OptimizerSummary", "TensorEntry", "inspect"]


@dataclass
class InspectResult:
    path: str
    format: str
    kind: str
    tensors: list[TensorEntry]
    optimizers: list[OptimizerSummary]
    structure: Any
    parameters: int
    buffers: int
    optimizer_elements: int
    tensor_bytes: int
    file_size: int
    bytes_read: int
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def inspect(path: str | Path, budgets: Budgets = DEFAULT_BUDGETS) -> InspectResult:
    """Describe the checkpoint at ``path`` without importing torch or running its pickle."""
    with readable(Path(path)):
        container = read_container(Path(path), budgets)
    walker = Walker()
    shards = container.children or [container]
    for index, shard in enumerate(shards):
        walker.shard = f"{index}:" if len(shards) > 1 else ""
        _walk_container(shard, walker)
    if container.format == "hf-sharded":
        walker.structure = {"weight_map": f"<{len(container.metadata['weight_map'])} tensors>"}
    walker.link_storages()
    tensors = walker.entries
    unique = walker.unique_records()
    params = sum(r.numel for r, role in unique if role == "parameter")
    buffers = sum(r.numel for r, role in unique if role == "buffer")
    optim = sum(r.numel for r, role in unique if role == "optimizer")
    notes = list(container.notes) + [n for c in container.children for n in c.notes]
    return InspectResult(
        path=str(path),
        format=container.format,
        kind=_kind(container, walker),
        tensors=tensors,
        optimizers=walker.optimizers,
        structure=walker.structure,
        parameters=params,
        buffers=buffers,
        optimizer_elements=optim,
        tensor_bytes=walker.storage_bytes(),
        file_size=container.file_size,
        bytes_read=container.bytes_read,
        notes=notes,
    )


def _walk_container(container: Container, walker: Walker) -> None:
    _check_readable(container)
    if container.format == "safetensors":
        for entry in container.safetensors:
            dtype = SAFETENSORS_DTYPES.get(entry.dtype, entry.dtype)
            record = TensorRecord(dtype, entry.shape, None, entry.name, 0, entry.nbytes)
            walker.add(entry.name, record)
        walker.structure = {"__metadata__": container.metadata} if container.metadata else {}
        return
    if container.format == "pt2":
        for key, record in pt2_tensors(container.described):
            walker.add(key, record)
        walker.structure = {"<torch.export program>": f"<{len(walker.entries)} tensors>"}
        return
    data = container.data
    if data is None:
        if container.format == "torchscript":
            return
        raise corrupt(container.path, container.failure or "no object pickle found")
    if container.format == "torch-tar":
        walker.persistent = tar_tensors(container.described)
    walker.structure = walker.walk(data.result.value)


def _check_readable(container: Container) -> None:
    """Inspect describes what torch.load would return: it needs a complete object pickle."""
    for member in container.pickles:
        stop = member.result.stop
        if stop is not None and stop.kind == "budget":
            raise TorchwiseError(
                f"{container.path}: {member.name} is {stop.message}",
                hint="raise the limit with the matching --max-* flag",
            )
        if member.loaded and stop is not None:
            raise corrupt(container.path, f"{member.name}: {stop.message} at byte {stop.offset}")
    if container.failure and container.format not in ("pt2", "torchscript"):
        raise corrupt(container.path, container.failure)


def _kind(container: Container, walker: Walker) -> str:
    top = walker.top_keys
    if "pytorch-lightning_version" in top or {"state_dict", "optimizer_states"} <= top:
        return "Lightning checkpoint"
    if walker.optimizers or top & {"epoch", "global_step", "step", "iteration"}:
        return "training checkpoint"
    if walker.modules:
        return "pickled nn.Module (torch.save(model))"
    if container.format in ("safetensors", "hf-sharded") or walker.flat:
        return "state dict"
    return "pickled object"
