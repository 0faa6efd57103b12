"""``torchwise ckpt inspect``: what is in a checkpoint, read without executing it.

Walks the symbolically rebuilt object graph of the pickle ``torch.load`` would
unpickle (or a safetensors header), lists every tensor by dotted key, sums
parameters, buffers and optimizer state, and summarises the non-tensor
structure (epoch, optimizer hyperparameters, Lightning metadata, ...).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torchwise.ckpt.budgets import DEFAULT_BUDGETS, Budgets
from torchwise.ckpt.formats.container import Container
from torchwise.ckpt.loaders.routes import read_container
from torchwise.ckpt.loaders.torch_load import corrupt, readable
from torchwise.ckpt.picklevm.values import Call, Global, PDict, PersistentRef, PSet, Unhashable
from torchwise.ckpt.tensors import (
    SAFETENSORS_DTYPES,
    TensorRecord,
    as_tensor,
    pt2_tensors,
    tar_tensors,
)
from torchwise.errors import TorchwiseError

#: state_dict entries that are buffers, not parameters
BUFFER_NAMES = frozenset(
    {"running_mean", "running_var", "num_batches_tracked", "position_ids", "inv_freq"}
)
_FLOATING = ("float", "bfloat", "complex")


@dataclass
class TensorEntry:
    key: str
    dtype: str
    shape: tuple[int, ...]
    numel: int
    nbytes: int
    #: parameter, buffer, optimizer (optimizer state) or other
    role: str
    kind: str
    storage_key: str | None
    storage_nbytes: int | None
    contiguous: bool
    #: other keys that hold the very same tensor object (each also has a row of its own)
    aliases: list[str] = field(default_factory=list)
    #: on an alias's row: the key it is the same tensor as (its storage is that key's)
    alias_of: str | None = None
    #: keys of other tensors viewing the same storage (tied weights, views)
    shares_storage_with: list[str] = field(default_factory=list)


@dataclass
class OptimizerSummary:
    key: str
    params_with_state: int
    state_names: list[str]
    param_groups: list[dict[str, Any]]


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
    walker = _Walker()
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


def _walk_container(container: Container, walker: _Walker) -> None:
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
    walker.structure = walker.visit(data.result.value, "", depth=0)


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


def _kind(container: Container, walker: _Walker) -> str:
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


class _Walker:
    def __init__(self) -> None:
        self.shard = ""
        self.entries: list[TensorEntry] = []
        self.records: dict[int, tuple[TensorRecord, TensorEntry]] = {}
        self.optimizers: list[OptimizerSummary] = []
        self.structure: Any = None
        self.top_keys: set[str] = set()
        self.modules = 0
        self.flat = False
        self._optim_depth = 0
        self._seen: set[int] = set()
        self._cache: dict[int, TensorRecord] = {}
        #: tensors that a persistent id stands for (a tar checkpoint's tensors member)
        self.persistent: dict[str, TensorRecord] = {}

    def add(self, key: str, record: TensorRecord, in_optimizer: bool = False) -> None:
        known = self.records.get(id(record))
        if known is not None:  # the same object through the memo: an alias, not a copy
            first = known[1]
            first.aliases.append(key)
            alias = TensorEntry(
                key,
                first.dtype,
                first.shape,
                first.numel,
                first.nbytes,
                first.role,
                first.kind,
                first.storage_key,
                first.storage_nbytes,
                first.contiguous,
                alias_of=first.key,
            )
            self.entries.append(alias)
            return
        leaf = key.rsplit(".", 1)[-1]
        if in_optimizer:
            role = "optimizer"
        elif record.kind == "ndarray":
            role = "other"
        elif leaf in BUFFER_NAMES or not record.dtype.startswith(_FLOATING):
            role = "buffer"
        else:
            role = "parameter"
        storage = f"{self.shard}{record.storage_key}" if record.storage_key else None
        entry = TensorEntry(
            key,
            record.dtype,
            record.shape,
            record.numel,
            record.nbytes,
            role,
            record.kind,
            storage,
            record.storage_nbytes,
            record.contiguous,
        )
        self.records[id(record)] = (record, entry)
        self.entries.append(entry)

    def visit(self, obj: Any, key: str, depth: int) -> Any:
        """Collect tensors under ``obj`` and return its JSON-able outline."""
        record = as_tensor(obj)
        if record is None and isinstance(obj, PersistentRef) and self.persistent:
            record = self.persistent.get(str(obj.pid))
        if record is not None:
            self.add(key, self._cached(obj, record), self._optim_depth > 0)
            return f"<tensor {record.describe()}>"
        if depth > 40 or id(obj) in self._seen:
            return "<...>"
        if isinstance(obj, dict):
            return self._visit_dict(obj, key, depth)
        if isinstance(obj, (list, tuple)):
            self._seen.add(id(obj))
            items = [self.visit(v, _join(key, str(i)), depth + 1) for i, v in enumerate(obj)]
            self._seen.discard(id(obj))
            if len(items) > 12:
                return [*items[:6], f"... {len(items)} items"]
            return items if not isinstance(obj, PSet) else {"<set>": items}
        if isinstance(obj, Call):
            return self._visit_call(obj, key, depth)
        if isinstance(obj, Global):
            return f"<{obj.qualname}>"
        if isinstance(obj, (bytes, bytearray)):
            return f"<{len(obj)} bytes>"
        if isinstance(obj, PersistentRef):
            return "<persistent id>"
        if isinstance(obj, Unhashable):
            return "<unhashable key>"
        if isinstance(obj, str) and len(obj) > 200:
            return obj[:200] + "..."
        return obj

    def _cached(self, obj: Any, record: TensorRecord) -> TensorRecord:
        # as_tensor builds a new record each call; memo-shared objects must map to one.
        return self._cache.setdefault(id(obj), record)

    def _visit_dict(self, obj: dict[Any, Any], key: str, depth: int) -> Any:
        self._seen.add(id(obj))
        is_optimizer = "state" in obj and "param_groups" in obj
        if is_optimizer:
            self._optimizer(obj, key)
            self._optim_depth += 1
        if depth == 0:
            self.top_keys = {str(k) for k in obj}
            self.flat = bool(obj) and all(as_tensor(v) is not None for v in obj.values())
        outline: dict[str, Any] = {}
        n_tensors = 0
        for k, v in obj.items():
            sub = self.visit(v, _join(key, _key(k)), depth + 1)
            if isinstance(sub, str) and sub.startswith("<tensor "):
                n_tensors += 1
            outline[_key(k)] = sub
        if is_optimizer:
            self._optim_depth -= 1
            state = obj.get("state")
            if isinstance(state, dict):  # the per-parameter detail is in the summary
                outline["state"] = f"<per-parameter state for {len(state)} parameters>"
        self._seen.discard(id(obj))
        if n_tensors > 8 and n_tensors == len(outline):
            return f"<{n_tensors} tensors>"
        if isinstance(obj, PDict) and obj.type_name not in (None, "collections.OrderedDict"):
            return {f"<{obj.type_name}>": outline}
        return outline

    def _visit_call(self, obj: Call, key: str, depth: int) -> Any:
        name = obj.func.qualname if isinstance(obj.func, Global) else "<computed callable>"
        if name.startswith("torch.nn."):
            self.modules += 1
        self._seen.add(id(obj))
        args = self.visit(obj.args, key, depth + 1) if obj.args not in ((), None) else None
        state = self.visit(obj.state, key, depth + 1) if obj.state is not None else None
        self._seen.discard(id(obj))
        outline: dict[str, Any] = {}
        if args is not None:
            outline["args"] = args
        if state is not None:
            outline["state"] = state
        return {f"<{name}>": outline}

    def _optimizer(self, obj: dict[Any, Any], key: str) -> None:
        state, groups = obj.get("state"), obj.get("param_groups")
        names: set[str] = set()
        if isinstance(state, dict):
            for per_param in state.values():
                if isinstance(per_param, dict):
                    names.update(str(k) for k in per_param)
        summary = []
        for group in groups if isinstance(groups, list) else []:
            if isinstance(group, dict):
                hyper = {str(k): v for k, v in group.items() if _is_scalar(v) or k == "betas"}
                params = group.get("params")
                hyper["params"] = len(params) if isinstance(params, list) else params
                summary.append(hyper)
        n = len(state) if isinstance(state, dict) else 0
        self.optimizers.append(OptimizerSummary(key or "<root>", n, sorted(names), summary))

    def link_storages(self) -> None:
        by_storage: dict[str, list[TensorEntry]] = {}
        for entry in self.entries:
            if entry.storage_key is not None and entry.alias_of is None:
                by_storage.setdefault(entry.storage_key, []).append(entry)
        for group in by_storage.values():
            for entry in group:
                entry.shares_storage_with = [e.key for e in group if e is not entry]

    def unique_records(self) -> list[tuple[TensorRecord, str]]:
        """One per distinct tensor: tied weights (same storage, offset, shape) count once."""
        seen: set[tuple[Any, ...]] = set()
        out = []
        for record, entry in self.records.values():
            ident: tuple[Any, ...] = (id(record),)
            if entry.storage_key is not None:
                ident = (entry.storage_key, record.storage_offset, record.shape, record.stride)
            if ident not in seen:
                seen.add(ident)
                out.append((record, entry.role))
        return out

    def storage_bytes(self) -> int:
        sizes: dict[Any, int] = {}
        for record, entry in self.records.values():
            ident = entry.storage_key or id(record)
            sizes[ident] = max(sizes.get(ident, 0), record.storage_nbytes or record.nbytes)
        return sum(sizes.values())


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _key(k: Any) -> str:
    return k if isinstance(k, str) else str(k)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
