"""Read the structure back from the written file and hold it against what torch loaded.

The tensors are checked byte for byte by :mod:`.stwriter`; this checks everything
around them: the structure JSON as it was written to the file's metadata is
decoded (tensors standing in as placeholders) and compared with the loaded
object, node for node: types (a tuple stays a tuple, an OrderedDict an
OrderedDict), keys and their order, values (NaN equal to NaN), which tensor sits
where, Parameters and ``requires_grad``, every tensor's attributes, and which
containers are one shared object. Values left out with ``--drop-non-tensor``
are the only difference allowed.
"""

from __future__ import annotations

import math
from typing import Any

from torchwise.ckpt.conversion import typedjson
from torchwise.ckpt.conversion.plan import Section


class _Placeholder:
    def __init__(self, node: dict[str, Any], attrs: Any) -> None:
        self.node, self.attrs = node, attrs


class Mismatch(ValueError):
    """The structure read back differs from the loaded object."""


def check_structure(original: Any, text: str, section: Section) -> None:
    """Raise :class:`Mismatch` naming the first place where ``text`` decodes differently."""
    import json

    def fetch(node: dict[str, Any]) -> Any:
        attrs = decoder.decode(node["attrs"]) if "attrs" in node else {}
        return _Placeholder(node, attrs)

    decoder = typedjson.Decoder(fetch)
    decoded = decoder.decode(json.loads(text))
    dropped = {entry.rsplit(" (", 1)[-1].rstrip(")") for entry in section.dropped}
    _Comparer(section, dropped).same(original, decoded, "<root>")


class _Comparer:
    def __init__(self, section: Section, dropped: set[str]) -> None:
        self.section, self.dropped = section, dropped
        self.pairs: dict[int, int] = {}  # id(original container) -> id(decoded container)

    def same(self, a: Any, b: Any, where: str) -> None:
        if isinstance(b, _Placeholder):
            self._placeholder(a, b, where)
            return
        if b is None and a is not None and _qualname(a) in self.dropped:
            return
        if type(a) is not type(b):
            raise Mismatch(f"{where}: a {_qualname(a)} was written as a {_qualname(b)}")
        if isinstance(a, (list, tuple, dict, set, frozenset)) or _namespace(a):
            if id(a) in self.pairs:
                if self.pairs[id(a)] != id(b):
                    raise Mismatch(f"{where}: one shared object was written as two")
                return
            self.pairs[id(a)] = id(b)
        if isinstance(a, dict):
            if list(a) != list(b):
                raise Mismatch(f"{where}: its keys differ")
            for key in a:
                self.same(a[key], b[key], f"{where}.{key}")
        elif isinstance(a, (list, tuple)):
            if len(a) != len(b):
                raise Mismatch(f"{where}: {len(a)} items were written as {len(b)}")
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                self.same(x, y, f"{where}.{i}")
        elif _namespace(a):
            self.same(vars(a), vars(b), where)
        elif not _equal(a, b):
            raise Mismatch(f"{where}: {a!r} was written as {b!r}")

    def _placeholder(self, a: Any, b: _Placeholder, where: str) -> None:
        import torch

        node = b.node
        key = self.section.keys.get(id(a))
        name = node.get("$tensor") or node.get("$ndarray")
        if key is None or (name is not None and name != key):
            raise Mismatch(f"{where}: the tensor written there is {name}, not this one")
        if isinstance(a, torch.Tensor):
            if bool(node.get("parameter")) != isinstance(a, torch.nn.Parameter):
                raise Mismatch(f"{where}: Parameter or not was not kept")
            if bool(node.get("requires_grad")) != a.requires_grad:
                raise Mismatch(f"{where}: requires_grad was not kept")
            self.same(vars(a), b.attrs or {}, f"{where}.<attributes>")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if type(a).__module__ == "numpy":
        return bool(a.dtype == b.dtype and (a == b or (a != a and b != b)))
    return bool(a == b)


def _namespace(value: Any) -> bool:
    return type(value).__name__ == "Namespace" and type(value).__module__ == "argparse"


def _qualname(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__name__}"
