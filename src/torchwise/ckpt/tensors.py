"""Recognise tensors in a symbolically rebuilt pickle.

``torch.save`` pickles a tensor as a call to one of ``torch._utils._rebuild_*``
whose first argument is a persistent id naming the storage. Here those inert
:class:`~torchwise.ckpt.picklevm.machine.Call` records become :class:`TensorRecord`
(dtype, shape, stride, storage key and size) without importing torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torchwise.ckpt.picklevm.values import Call, Global, PersistentRef

STORAGE_DTYPES = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4",
    "UntypedStorage": "uint8",
}
ELEMENT_SIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex128": 16,
    "complex64": 8,
    "complex32": 4,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
    "quint4x2": 1,
    "quint2x4": 1,
    "bits8": 1,
    "bits16": 2,
    "bits1x8": 1,
    "bits2x4": 1,
    "bits4x2": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "float4_e2m1fn_x2": 1,
}
SAFETENSORS_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "C64": "complex64",
}
_TORCH_PARSERS = {"torch._utils", "torch._tensor"}


@dataclass(eq=False)
class TensorRecord:
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...] | None
    #: the storage's key in the archive (zip member data/<key>, legacy key, safetensors name)
    storage_key: str | None
    storage_offset: int = 0
    storage_nbytes: int | None = None
    device: str = "cpu"
    requires_grad: bool = False
    #: tensor, parameter, quantized, sparse, meta, ndarray, subclass
    kind: str = "tensor"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * ELEMENT_SIZE.get(self.dtype, 1)

    @property
    def contiguous(self) -> bool:
        if self.stride is None:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.stride), strict=False):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def describe(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


def storage_element_size(storage_type: Any, dtype: str | None) -> int:
    if dtype is not None:
        return ELEMENT_SIZE.get(dtype, 1)
    name = storage_type.name if isinstance(storage_type, Global) else str(storage_type)
    return ELEMENT_SIZE.get(STORAGE_DTYPES.get(name, "uint8"), 1)


def _dtype_of(value: Any) -> str | None:
    if isinstance(value, Global) and value.module == "torch":
        return value.name
    return None


def _ints(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, Call) and isinstance(value.func, Global):  # torch.Size((2, 3))
        value = value.args[0] if value.args else ()
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
        return tuple(int(v) for v in value)
    return None


def _storage(ref: Any, dtype: str | None) -> tuple[str | None, str, int | None, str]:
    """(key, dtype, nbytes, location) from a torch storage persistent id."""
    pid = ref.pid if isinstance(ref, PersistentRef) else None
    if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
        return None, dtype or "unknown", None, "cpu"
    storage_type, key, location, numel = pid[1], str(pid[2]), str(pid[3]), pid[4]
    name = storage_type.name if isinstance(storage_type, Global) else ""
    storage_dtype = STORAGE_DTYPES.get(name, "uint8")
    # UntypedStorage persistent ids count bytes; typed ones count elements.
    nbytes = int(numel) * ELEMENT_SIZE.get(storage_dtype, 1) if isinstance(numel, int) else None
    if dtype is None:
        dtype = storage_dtype
    return key, dtype, nbytes, location


def as_tensor(obj: Any) -> TensorRecord | None:
    """The tensor ``obj`` rebuilds, or None when it is not a tensor-rebuilding call."""
    if not (isinstance(obj, Call) and isinstance(obj.func, Global)):
        return None
    func, args = obj.func.qualname, obj.args if isinstance(obj.args, tuple) else ()
    module, _, name = func.rpartition(".")
    if name.endswith("Tensor") and module in ("torch", "torch.cuda") and obj.state is not None:
        return _legacy_tensor(obj, name, module)
    if func == "torch.nn.parameter.Parameter" and args:
        inner = as_tensor(args[0])
        if inner is not None:
            inner.kind = "parameter"
        return inner
    if module == "numpy.core.multiarray" or module == "numpy._core.multiarray":
        return _ndarray(obj) if name == "_reconstruct" else None
    if module not in _TORCH_PARSERS or len(args) < 1:
        return None
    if name == "_rebuild_from_type_v2" and len(args) >= 3 and isinstance(args[0], Global):
        inner = as_tensor(Call(args[0], args[2], obj.offset, obj.opcode))
        if inner is not None and isinstance(args[1], Global):
            if args[1].qualname == "torch.nn.parameter.Parameter":
                inner.kind = "parameter"
            elif args[1].qualname != "torch.Tensor":
                inner.kind = "subclass"
        return inner
    if name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
        inner = as_tensor(args[0])
        if inner is not None:
            inner.kind = "parameter"
            inner.requires_grad = bool(args[1]) if len(args) > 1 else True
        return inner
    if name in ("_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_qtensor"):
        if len(args) < 4:
            return None
        dtype = _dtype_of(args[6]) if name == "_rebuild_tensor_v3" and len(args) > 6 else None
        key, dtype, nbytes, location = _storage(args[0], dtype)
        shape, stride = _ints(args[2]), _ints(args[3])
        if shape is None:
            return None
        record = TensorRecord(dtype, shape, stride, key, int(args[1] or 0), nbytes, location)
        record.requires_grad = (
            bool(args[4]) if len(args) > 4 and name != "_rebuild_qtensor" else False
        )
        if name == "_rebuild_qtensor":
            record.kind = "quantized"
        return record
    if name == "_rebuild_meta_tensor_no_storage" and len(args) >= 3:
        shape = _ints(args[1])
        if shape is None:
            return None
        return TensorRecord(
            _dtype_of(args[0]) or "unknown", shape, _ints(args[2]), None, device="meta", kind="meta"
        )
    if name in ("_rebuild_device_tensor_from_cpu_tensor", "_rebuild_device_tensor_from_numpy"):
        inner = as_tensor(args[0])
        if inner is not None and len(args) > 2:
            inner.device = str(args[2].args[0] if isinstance(args[2], Call) else args[2])
        return inner
    if name == "_rebuild_sparse_tensor" and len(args) >= 2 and isinstance(args[1], tuple):
        parts = args[1]
        values = as_tensor(parts[1]) if len(parts) > 1 else None
        shape = _ints(parts[2]) if len(parts) > 2 else None
        if values is None or shape is None:
            return None
        return TensorRecord(
            values.dtype, shape, None, values.storage_key, 0, values.storage_nbytes, kind="sparse"
        )
    return None


def _legacy_tensor(obj: Call, name: str, module: str) -> TensorRecord | None:
    """torch < 0.4: ``torch.FloatTensor()`` then BUILD (storage, offset, size, stride)."""
    state = obj.state
    if not (isinstance(state, tuple) and len(state) >= 4):
        return None
    shape, stride = _ints(state[2]), _ints(state[3])
    if shape is None:
        return None
    dtype = STORAGE_DTYPES.get(name.replace("Tensor", "Storage"), "unknown")
    key, _, nbytes, location = _storage(state[0], dtype)
    device = location if module == "torch" else location or "cuda"
    offset = state[1] if isinstance(state[1], int) else 0
    return TensorRecord(dtype, shape, stride, key, offset, nbytes, device)


_NUMPY_DTYPES = {
    "f8": "float64",
    "f4": "float32",
    "f2": "float16",
    "i8": "int64",
    "i4": "int32",
    "i2": "int16",
    "i1": "int8",
    "u1": "uint8",
    "b1": "bool",
    "c8": "complex64",
    "c16": "complex128",
    "u2": "uint16",
    "u4": "uint32",
    "u8": "uint64",
}


def _ndarray(obj: Call) -> TensorRecord | None:
    # ndarray.__reduce__: (_reconstruct, (ndarray, (0,), b'b'), (1, shape, dtype, fortran, raw))
    state = obj.state
    if not (isinstance(state, tuple) and len(state) >= 5):
        return None
    shape = _ints(state[1])
    dtype_call = state[2]
    code = dtype_call.args[0] if isinstance(dtype_call, Call) and dtype_call.args else "?"
    if shape is None:
        return None
    dtype = _NUMPY_DTYPES.get(str(code).lstrip("<>|="), f"numpy:{code}")
    return TensorRecord(dtype, shape, None, None, kind="ndarray")


# --- tensors described outside a pickle --------------------------------------------------

#: torch._export.serde.schema.ScalarType -> dtype name
_PT2_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16",
               7: "float32", 8: "float64", 9: "complex32", 10: "complex64", 11: "complex128",
               12: "bool", 13: "bfloat16", 28: "uint16", 29: "float8_e4m3fn",
               30: "float8_e5m2", 31: "float8_e4m3fnuz", 32: "float8_e5m2fnuz",
               33: "float8_e8m0fnu", 34: "uint32", 35: "uint64"}  # fmt: skip


def _as_ints(items: Any) -> tuple[int, ...] | None:
    """A .pt2 symbolic int list: [{"as_int": 3}, ...]."""
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        if not (isinstance(item, dict) and isinstance(item.get("as_int"), int)):
            return None
        out.append(item["as_int"])
    return tuple(out)


def pt2_tensors(described: dict[str, Any]) -> list[tuple[str, TensorRecord]]:
    """Weights and constants a .pt2 lists in its ``*_config.json`` records."""
    found = []
    for key, entry in described.items():
        section, _, name = key.partition(":")
        meta = entry.get("tensor_meta") if isinstance(entry, dict) else None
        if not isinstance(meta, dict):
            continue
        shape = _as_ints(meta.get("sizes"))
        if shape is None:
            continue
        dtype = _PT2_DTYPES.get(meta.get("dtype", 0), "unknown")
        record = TensorRecord(dtype, shape, _as_ints(meta.get("strides")), entry.get("path_name"))
        record.kind = "parameter" if entry.get("is_param") else "tensor"
        found.append((name if section == "weights" else f"{section}.{name}", record))
    return found


def tar_tensors(described: dict[str, Any]) -> dict[str, TensorRecord]:
    """Persistent-id key -> tensor, from a tar checkpoint's tensors and storages members."""
    tables = described.get("tar") or {}
    storages = tables.get("storages", {})
    found: dict[str, TensorRecord] = {}
    for key, (storage_key, sizes, strides, offset) in tables.get("tensors", {}).items():
        dtype, numel = storages.get(storage_key, ("unknown", 0))
        nbytes = numel * ELEMENT_SIZE.get(dtype, 1)
        found[str(key)] = TensorRecord(dtype, sizes, strides, str(storage_key), offset, nbytes)
    return found
