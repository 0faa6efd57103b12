"""A checkpoint's structure as real JSON, so a converted file can be rebuilt exactly.

safetensors holds flat tensors and string metadata. What a training checkpoint
also holds (epochs, optimizer param groups with tuple ``betas``, integer keys of
optimizer state, an ``argparse.Namespace`` of hyperparameters, a NumPy RNG state
tuple) goes into the ``torchwise.structure`` metadata as JSON, with a tag for
each type plain JSON would blur:

======================  ==========================================
value                   JSON
======================  ==========================================
None, bool, int, str    as is
float                   as is; ``{"$float": "nan" | "inf" | "-inf"}``
list                    a list
dict with str keys      an object (``{"$dict": [[k, v], ...]}``
                        when a key is not a string or starts with $)
tuple, set, frozenset   ``{"$tuple": [...]}``, ``{"$set": ...}``, ``{"$frozenset": ...}``
bytes, bytearray        ``{"$bytes": base64}``, ``{"$bytearray": base64}``
complex                 ``{"$complex": [real, imag]}``
torch dtype, device,    ``{"$dtype": "float16"}``, ``{"$device": "cuda:0"}``,
Size                    ``{"$size": [2, 3]}``
argparse.Namespace      ``{"$namespace": {...}}``
pathlib paths           ``{"$path": ["PosixPath", "/data"]}``
datetime values         ``{"$datetime": ["date", "2024-01-31"]}``, ``{"$timedelta": [d, s, us]}``
NumPy scalar            ``{"$numpy": ["float32", 0.5]}``
a tensor / an ndarray   ``{"$tensor": "key"}`` / ``{"$ndarray": "key"}`` (data in the file)
a shared container      ``{"$shared": n, "value": ...}`` where it first appears, then
                        ``{"$ref": n}`` wherever the same object appears again
======================  ==========================================

Shared references (the pickle's memo) are kept as references, never copied:
each object is encoded once, so a structure of 2**64 paths through 64 lists is
64 entries, and :func:`decode` gives back one object where there was one. A
cycle through a mutable container is kept; one through a tuple, a set or a
namespace has no faithful form and is refused, as is anything else without
one (:class:`Unrepresentable`, or with ``--drop-non-tensor`` ``{"$dropped": type}``).
Nesting deeper than JSON itself allows is :class:`TooDeep`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

#: encode a tensor-like leaf: returns its JSON placeholder, or None when ``value`` is not one
TensorHook = Callable[[Any, str], dict[str, Any] | None]
#: containers that can be shared (and so are encoded once)
_SHAREABLE = (list, tuple, dict, set, frozenset)
_MUTABLE = (list, dict)
#: the deepest nesting written (encode, json.dumps and load_converted all recurse per level)
MAX_DEPTH = 200


class Unrepresentable(Exception):
    def __init__(self, key: str, value: Any, why: str = "") -> None:
        self.key = key
        self.type_name = f"{type(value).__module__}.{type(value).__name__}"
        super().__init__(f"{key or '<root>'}: a {self.type_name}{why}")
        self.why = why


class TooDeep(Exception):
    """The structure nests deeper than :data:`MAX_DEPTH`."""


class Encoder:
    """One encoding: shared containers get ids; ``dropped`` collects what has no JSON form
    (None: refuse instead)."""

    def __init__(self, tensors: TensorHook, dropped: list[str] | None = None) -> None:
        self.tensors = tensors
        self.dropped = dropped
        self.counts: dict[int, int] = {}
        self.ids: dict[int, int] = {}
        self.open: set[int] = set()

    def encode(self, value: Any, key: str) -> Any:
        self._count(value)
        try:
            return self._encode(value, key, 0)
        except RecursionError:
            raise TooDeep(key) from None

    def _count(self, root: Any) -> None:
        """How often each container is reached (iteratively; each one's children once)."""
        stack = [root]
        while stack:
            value = stack.pop()
            if not isinstance(value, _SHAREABLE) and not _is_namespace(value):
                continue
            seen = self.counts.get(id(value), 0)
            self.counts[id(value)] = seen + 1
            if seen:
                continue
            if isinstance(value, dict):
                stack.extend(value.keys())
                stack.extend(value.values())
            elif _is_namespace(value):
                stack.extend(vars(value).values())
            else:
                stack.extend(value)

    def _encode(self, value: Any, key: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise TooDeep(key)
        placeholder = self.tensors(value, key)
        if placeholder is not None:
            return placeholder
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        tagged = _scalar(value)
        if tagged is not None:
            return tagged
        if not (isinstance(value, _SHAREABLE) or _is_namespace(value)):
            return self._unrepresentable(key, value)
        ident = id(value)
        if ident in self.ids:
            if ident in self.open and not isinstance(value, _MUTABLE):
                raise Unrepresentable(key, value, " that contains itself")
            return {"$ref": self.ids[ident]}
        shared = self.counts.get(ident, 0) > 1
        if shared:
            self.ids[ident] = len(self.ids)
        self.open.add(ident)
        encoded = self._container(value, key, depth)
        self.open.discard(ident)
        return {"$shared": self.ids[ident], "value": encoded} if shared else encoded

    def _container(self, value: Any, key: str, depth: int) -> Any:
        if isinstance(value, list):
            return [self._encode(v, _join(key, str(i)), depth + 1) for i, v in enumerate(value)]
        if isinstance(value, tuple) and type(value) is tuple:
            return {"$tuple": [self._encode(v, _join(key, str(i)), depth + 1)
                               for i, v in enumerate(value)]}  # fmt: skip
        if isinstance(value, dict):
            return self._dict(value, key, depth)
        if isinstance(value, (set, frozenset)):
            tag = "$frozenset" if isinstance(value, frozenset) else "$set"
            return {tag: [self._encode(v, key, depth + 1) for v in value]}
        if _is_namespace(value):
            return {"$namespace": self._dict(vars(value), key, depth)}
        return self._unrepresentable(key, value)

    def _dict(self, value: dict[Any, Any], key: str, depth: int) -> Any:
        if type(value) is dict and all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: self._encode(v, _join(key, k), depth + 1) for k, v in value.items()}
        pairs = [[self._encode(k, key, depth + 1), self._encode(v, _join(key, str(k)), depth + 1)]
                 for k, v in value.items()]  # fmt: skip
        kind = type(value).__name__
        return {"$dict": pairs} if kind == "dict" else {"$dict": pairs, "type": kind}

    def _unrepresentable(self, key: str, value: Any) -> Any:
        if self.dropped is None:
            raise Unrepresentable(key, value)
        name = f"{type(value).__module__}.{type(value).__name__}"
        self.dropped.append(f"{key or '<root>'} ({name})")
        return {"$dropped": name}


def encode(value: Any, key: str, tensors: TensorHook, dropped: list[str] | None = None) -> Any:
    """``value`` as tagged JSON. ``dropped`` collects what has no JSON form (else it raises)."""
    return Encoder(tensors, dropped).encode(value, key)


def _is_namespace(value: Any) -> bool:
    return type(value).__name__ == "Namespace" and type(value).__module__ == "argparse"


def _scalar(value: Any) -> dict[str, Any] | None:
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, bytearray):
        return {"$bytearray": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, complex):
        return {"$complex": [value.real, value.imag]}
    module = type(value).__module__
    name = type(value).__name__
    if module == "torch" and name == "dtype":
        return {"$dtype": str(value).removeprefix("torch.")}
    if module == "torch" and name == "device":
        return {"$device": str(value)}
    if module == "torch" and name == "Size":
        return {"$size": list(value)}
    if module == "pathlib":
        return {"$path": [name, str(value)]}
    if module == "datetime" and name in ("datetime", "date", "time"):
        return {"$datetime": [name, value.isoformat()]}
    if module == "datetime" and name == "timedelta":
        return {"$timedelta": [value.days, value.seconds, value.microseconds]}
    if module == "numpy" and hasattr(value, "dtype") and hasattr(value, "item"):
        item = value.item()
        if isinstance(item, (bool, int, float)) and (
            not isinstance(item, float) or math.isfinite(item)
        ):
            return {"$numpy": [str(value.dtype), item]}
    return None


#: ``tensors(placeholder)`` returns the tensor (or array) for a ``$tensor``/``$ndarray``/``$meta``
Fetch = Callable[[dict[str, Any]], Any]


def decode(node: Any, tensors: Fetch) -> Any:
    """Rebuild a value from :func:`encode`'s JSON (one object per shared id)."""
    return Decoder(tensors).decode(node)


class Decoder:
    def __init__(self, tensors: Fetch) -> None:
        self.tensors = tensors
        self.shared: dict[int, Any] = {}

    def decode(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict):
            return node
        if "$tensor" in node or "$ndarray" in node or "$meta" in node:
            return self.tensors(node)
        if "$ref" in node and len(node) == 1:
            return self.shared[node["$ref"]]
        if "$shared" in node and len(node) == 2:
            return self._shared(node["$shared"], node["value"])
        if len(node) == 1 or (len(node) == 2 and "$dict" in node):
            tag = next(iter(node))
            if tag in _DECODERS:
                return _DECODERS[tag](node, self.decode)
        return {k: self.decode(v) for k, v in node.items()}

    def _shared(self, ident: int, node: Any) -> Any:
        """A mutable container is registered before its items are decoded (a cycle ends in
        itself); an immutable one after."""
        if isinstance(node, list):
            out: list[Any] = []
            self.shared[ident] = out
            out.extend(self.decode(v) for v in node)
            return out
        if isinstance(node, dict) and ("$dict" in node or not any(k.startswith("$") for k in node)):
            kind = node.get("type") if "$dict" in node else None
            target = _empty_dict(kind)
            self.shared[ident] = target
            pairs = node["$dict"] if "$dict" in node else [[k, v] for k, v in node.items()]
            for k, v in pairs:
                target[self.decode(k)] = self.decode(v)
            return target
        value = self.decode(node)
        self.shared[ident] = value
        return value


def _empty_dict(kind: str | None) -> dict[Any, Any]:
    if kind == "OrderedDict":
        from collections import OrderedDict

        return OrderedDict()
    if kind == "Counter":
        from collections import Counter

        return Counter()
    return {}


Decode = Callable[[Any], Any]


def _decode_dict(node: dict[str, Any], decode: Decode) -> Any:
    target = _empty_dict(node.get("type"))
    for k, v in node["$dict"]:
        target[decode(k)] = decode(v)
    return target


def _torch(attr: str) -> Any:
    import torch

    return getattr(torch, attr)


_DECODERS: dict[str, Callable[[dict[str, Any], Decode], Any]] = {
    "$float": lambda n, d: float(n["$float"]),
    "$tuple": lambda n, d: tuple(d(v) for v in n["$tuple"]),
    "$set": lambda n, d: {d(v) for v in n["$set"]},
    "$frozenset": lambda n, d: frozenset(d(v) for v in n["$frozenset"]),
    "$bytes": lambda n, d: base64.b64decode(n["$bytes"]),
    "$bytearray": lambda n, d: bytearray(base64.b64decode(n["$bytearray"])),
    "$complex": lambda n, d: complex(*n["$complex"]),
    "$dtype": lambda n, d: _torch(n["$dtype"]),
    "$device": lambda n, d: _torch("device")(n["$device"]),
    "$size": lambda n, d: _torch("Size")(n["$size"]),
    "$namespace": lambda n, d: __import__("argparse").Namespace(**d(n["$namespace"])),
    "$numpy": lambda n, d: __import__("numpy").dtype(n["$numpy"][0]).type(n["$numpy"][1]),
    "$dict": _decode_dict,
    "$path": lambda n, d: getattr(__import__("pathlib"), n["$path"][0])(n["$path"][1]),
    "$datetime": lambda n, d: getattr(__import__("datetime"), n["$datetime"][0]).fromisoformat(
        n["$datetime"][1]
    ),
    "$timedelta": lambda n, d: __import__("datetime").timedelta(*n["$timedelta"]),
    "$dropped": lambda n, d: None,
}


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
