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
======================  ==========================================

Anything else has no faithful JSON form: :class:`Unrepresentable` names it, and
convert refuses the file unless ``--drop-non-tensor`` (then ``{"$dropped": type}``).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

#: encode a tensor-like leaf: returns its JSON placeholder, or None when ``value`` is not one
TensorHook = Callable[[Any, str], dict[str, str] | None]


class Unrepresentable(Exception):
    def __init__(self, key: str, value: Any) -> None:
        super().__init__(f"{key or '<root>'}: a {type(value).__module__}.{type(value).__name__}")
        self.key = key
        self.type_name = f"{type(value).__module__}.{type(value).__name__}"


def encode(value: Any, key: str, tensors: TensorHook, dropped: list[str] | None = None) -> Any:
    """``value`` as tagged JSON. ``dropped`` collects what has no JSON form (else it raises)."""
    placeholder = tensors(value, key)
    if placeholder is not None:
        return placeholder
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, list):
        return [encode(v, _join(key, str(i)), tensors, dropped) for i, v in enumerate(value)]
    if isinstance(value, tuple) and type(value) is tuple:
        return {"$tuple": [encode(v, _join(key, str(i)), tensors, dropped)
                           for i, v in enumerate(value)]}  # fmt: skip
    if isinstance(value, dict):
        return _encode_dict(value, key, tensors, dropped)
    tagged = _scalar(value)
    if tagged is not None:
        return tagged
    if isinstance(value, (set, frozenset)):
        tag = "$frozenset" if isinstance(value, frozenset) else "$set"
        return {tag: [encode(v, key, tensors, dropped) for v in value]}
    if type(value).__name__ == "Namespace" and type(value).__module__ == "argparse":
        return {"$namespace": _encode_dict(vars(value), key, tensors, dropped)}
    if dropped is None:
        raise Unrepresentable(key, value)
    dropped.append(f"{key or '<root>'} ({type(value).__module__}.{type(value).__name__})")
    return {"$dropped": f"{type(value).__module__}.{type(value).__name__}"}


def _encode_dict(
    value: dict[Any, Any], key: str, tensors: TensorHook, dropped: list[str] | None
) -> Any:
    if type(value) is dict and all(isinstance(k, str) and not k.startswith("$") for k in value):
        return {k: encode(v, _join(key, k), tensors, dropped) for k, v in value.items()}
    pairs = [[encode(k, key, tensors, dropped), encode(v, _join(key, str(k)), tensors, dropped)]
             for k, v in value.items()]  # fmt: skip
    kind = type(value).__name__
    return {"$dict": pairs} if kind == "dict" else {"$dict": pairs, "type": kind}


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


Fetch = Callable[[str, str, bool, bool], Any]


def decode(node: Any, tensors: Fetch) -> Any:
    """Rebuild a value from :func:`encode`'s JSON.

    ``tensors(kind, key, parameter, requires_grad)`` returns the tensor (or array) for a
    placeholder; one object per distinct placeholder, so tied tensors stay tied.
    """
    if isinstance(node, list):
        return [decode(v, tensors) for v in node]
    if not isinstance(node, dict):
        return node
    if "$tensor" in node:
        return tensors("tensor", node["$tensor"], node.get("parameter", False),
                       node.get("requires_grad", False))  # fmt: skip
    if "$ndarray" in node:
        return tensors("ndarray", node["$ndarray"], False, False)
    if len(node) == 1 or (len(node) == 2 and "$dict" in node):
        tag = next(iter(node))
        if tag in _DECODERS:
            return _DECODERS[tag](node, tensors)
    return {k: decode(v, tensors) for k, v in node.items()}


def _decode_dict(node: dict[str, Any], tensors: Fetch) -> Any:
    pairs = [(decode(k, tensors), decode(v, tensors)) for k, v in node["$dict"]]
    if node.get("type") == "OrderedDict":
        from collections import OrderedDict

        return OrderedDict(pairs)
    if node.get("type") == "Counter":
        from collections import Counter

        return Counter(dict(pairs))
    return dict(pairs)


def _torch(attr: str) -> Any:
    import torch

    return getattr(torch, attr)


_DECODERS: dict[str, Callable[[dict[str, Any], Fetch], Any]] = {
    "$float": lambda n, t: float(n["$float"]),
    "$tuple": lambda n, t: tuple(decode(v, t) for v in n["$tuple"]),
    "$set": lambda n, t: {decode(v, t) for v in n["$set"]},
    "$frozenset": lambda n, t: frozenset(decode(v, t) for v in n["$frozenset"]),
    "$bytes": lambda n, t: base64.b64decode(n["$bytes"]),
    "$bytearray": lambda n, t: bytearray(base64.b64decode(n["$bytearray"])),
    "$complex": lambda n, t: complex(*n["$complex"]),
    "$dtype": lambda n, t: _torch(n["$dtype"]),
    "$device": lambda n, t: _torch("device")(n["$device"]),
    "$size": lambda n, t: _torch("Size")(n["$size"]),
    "$namespace": lambda n, t: __import__("argparse").Namespace(**decode(n["$namespace"], t)),
    "$numpy": lambda n, t: __import__("numpy").dtype(n["$numpy"][0]).type(n["$numpy"][1]),
    "$dict": _decode_dict,
    "$path": lambda n, t: getattr(__import__("pathlib"), n["$path"][0])(n["$path"][1]),
    "$datetime": lambda n, t: getattr(__import__("datetime"), n["$datetime"][0]).fromisoformat(
        n["$datetime"][1]
    ),
    "$timedelta": lambda n, t: __import__("datetime").timedelta(*n["$timedelta"]),
    "$dropped": lambda n, t: None,
}


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
