"""Walk the object a checkpoint's pickle rebuilds: its tensors, optimizers and outline.

The object is a graph, not a tree: the pickle's memo lets one list, dict or
tensor appear under many keys, and a hostile file can make a DAG whose paths
number 2**64 from a few hundred objects. So every object is visited **once**:
tensors are collected by an iterative walk (no recursion limit, however deep
the nesting), a tensor reached again is an alias row, a container reached
again is not walked again (its outline says which key it is the same object
as). The outline itself stops 40 levels down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchwise.ckpt.picklevm.values import Call, Global, PDict, PersistentRef, PSet, Unhashable
from torchwise.ckpt.tensors import TensorRecord, as_tensor

#: state_dict entries that are buffers, not parameters
BUFFER_NAMES = frozenset(
    {"running_mean", "running_var", "num_batches_tracked", "position_ids", "inv_freq"}
)
_FLOATING = ("float", "bfloat", "complex")
_OUTLINE_DEPTH = 40
#: keys listed per storage in "shares storage with" (a storage can back 100,000 views)
_SHARED_LISTED = 8


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
    #: keys of other tensors viewing the same storage (tied weights, views), the first few
    shares_storage_with: list[str] = field(default_factory=list)


@dataclass
class OptimizerSummary:
    key: str
    params_with_state: int
    state_names: list[str]
    param_groups: list[dict[str, Any]]


class Walker:
    def __init__(self) -> None:
        self.shard = ""
        self.entries: list[TensorEntry] = []
        self.records: dict[int, tuple[TensorRecord, TensorEntry]] = {}
        self.optimizers: list[OptimizerSummary] = []
        self.structure: Any = None
        self.top_keys: set[str] = set()
        self.modules = 0
        self.flat = False
        self._cache: dict[int, TensorRecord] = {}
        #: container id -> the key it was first reached under
        self._first_key: dict[int, str] = {}
        #: tensors that a persistent id stands for (a tar checkpoint's tensors member)
        self.persistent: dict[str, TensorRecord] = {}

    def walk(self, root: Any) -> Any:
        """Collect every tensor under ``root``; return its outline (JSON-able)."""
        if isinstance(root, dict):
            self.top_keys = {str(k) for k in root}
            self.flat = bool(root) and all(as_tensor(v) is not None for v in root.values())
        self._collect(root)
        return self._outline(root, set(), 0)

    def add(self, key: str, record: TensorRecord, in_optimizer: bool = False) -> None:
        known = self.records.get(id(record))
        if known is not None:  # the same object through the memo: an alias, not a copy
            first = known[1]
            first.aliases.append(key)
            alias = TensorEntry(
                key, first.dtype, first.shape, first.numel, first.nbytes, first.role,
                first.kind, first.storage_key, first.storage_nbytes, first.contiguous,
                alias_of=first.key,
            )  # fmt: skip
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
            key, record.dtype, record.shape, record.numel, record.nbytes, role, record.kind,
            storage, record.storage_nbytes, record.contiguous,
        )  # fmt: skip
        self.records[id(record)] = (record, entry)
        self.entries.append(entry)

    # --- the walk -------------------------------------------------------------------------

    def _tensor(self, obj: Any) -> TensorRecord | None:
        record = as_tensor(obj)
        if record is None and isinstance(obj, PersistentRef) and self.persistent:
            record = self.persistent.get(str(obj.pid))
        if record is None:
            return None
        # as_tensor builds a new record each call; memo-shared objects must map to one.
        return self._cache.setdefault(id(obj), record)

    def _collect(self, root: Any) -> None:
        """Preorder, depth first, each container once: an explicit stack, no recursion."""
        stack: list[tuple[Any, str, bool]] = [(root, "", False)]
        while stack:
            obj, key, in_optimizer = stack.pop()
            record = self._tensor(obj)
            if record is not None:
                self.add(key, record, in_optimizer)
                continue
            if not isinstance(obj, (dict, list, tuple, Call)) or id(obj) in self._first_key:
                continue
            self._first_key[id(obj)] = key
            children: list[tuple[Any, str, bool]] = []
            if isinstance(obj, dict):
                if "state" in obj and "param_groups" in obj:
                    self._optimizer(obj, key)
                    in_optimizer = True
                children = [(v, _join(key, _key(k)), in_optimizer) for k, v in obj.items()]
            elif isinstance(obj, (list, tuple)):
                children = [(v, _join(key, str(i)), in_optimizer) for i, v in enumerate(obj)]
            else:
                name = obj.func.qualname if isinstance(obj.func, Global) else ""
                self.modules += name.startswith("torch.nn.")
                children = [(obj.args, key, in_optimizer), (obj.state, key, in_optimizer)]
            stack.extend(reversed(children))

    def _outline(self, obj: Any, shown: set[int], depth: int) -> Any:
        record = self._tensor(obj)
        if record is not None:
            return f"<tensor {record.describe()}>"
        if isinstance(obj, (dict, list, tuple, Call)):
            if id(obj) in shown:
                return f"<same object as {self._first_key.get(id(obj)) or '<root>'}>"
            if depth > _OUTLINE_DEPTH:
                return "<...>"
            shown.add(id(obj))
        if isinstance(obj, dict):
            return self._outline_dict(obj, shown, depth)
        if isinstance(obj, (list, tuple)):
            items = [self._outline(v, shown, depth + 1) for v in obj[:13]]
            if len(obj) > 12:
                return [*items[:6], f"... {len(obj)} items"]
            return items if not isinstance(obj, PSet) else {"<set>": items}
        if isinstance(obj, Call):
            name = obj.func.qualname if isinstance(obj.func, Global) else "<computed callable>"
            outline: dict[str, Any] = {}
            if obj.args not in ((), None):
                outline["args"] = self._outline(obj.args, shown, depth + 1)
            if obj.state is not None:
                outline["state"] = self._outline(obj.state, shown, depth + 1)
            return {f"<{name}>": outline}
        return _leaf(obj)

    def _outline_dict(self, obj: dict[Any, Any], shown: set[int], depth: int) -> Any:
        is_optimizer = "state" in obj and "param_groups" in obj
        outline: dict[str, Any] = {}
        n_tensors = 0
        for k, v in obj.items():
            if is_optimizer and k == "state" and isinstance(v, dict):
                # the per-parameter detail is in the summary
                outline["state"] = f"<per-parameter state for {len(v)} parameters>"
                continue
            sub = self._outline(v, shown, depth + 1)
            n_tensors += isinstance(sub, str) and sub.startswith("<tensor ")
            outline[_key(k)] = sub
        if n_tensors > 8 and n_tensors == len(outline):
            return f"<{n_tensors} tensors>"
        if isinstance(obj, PDict) and obj.type_name not in (None, "collections.OrderedDict"):
            return {f"<{obj.type_name}>": outline}
        return outline

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

    # --- totals ---------------------------------------------------------------------------

    def link_storages(self) -> None:
        by_storage: dict[str, list[TensorEntry]] = {}
        for entry in self.entries:
            if entry.storage_key is not None and entry.alias_of is None:
                by_storage.setdefault(entry.storage_key, []).append(entry)
        for group in by_storage.values():
            if len(group) < 2:
                continue
            keys = [e.key for e in group[: _SHARED_LISTED + 1]]
            for entry in group:
                entry.shares_storage_with = [k for k in keys if k != entry.key][:_SHARED_LISTED]

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


def _leaf(obj: Any) -> Any:
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
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return f"<{type(obj).__name__}>"


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _key(k: Any) -> str:
    return k if isinstance(k, str) else str(k)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
