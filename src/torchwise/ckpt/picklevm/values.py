"""What the symbolic pickle machine builds, and what it records about a pickle.

Plain data (numbers, strings, lists, tuples, dicts, sets) is rebuilt as real
Python values. Everything that would import or call something becomes an inert
record: :class:`Global` for an import, :class:`Call` for a call,
:class:`PersistentRef` for a persistent id. A value the machine cannot know
(the result of an out-of-band buffer, a string the loader would decode
differently) is an :class:`Unknown`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False, slots=True)
class Global:
    """``module.name`` as the unpickler's ``find_class`` would import it."""

    module: str
    name: str
    offset: int
    opcode: str
    #: the module and name actually imported, after Python 2 name fixing
    #: (``__builtin__`` -> ``builtins`` for protocols < 3) and torch's own mapping
    fixed_module: str = ""
    fixed_name: str = ""

    @property
    def qualname(self) -> str:
        return f"{self.fixed_module or self.module}.{self.fixed_name or self.name}"

    def __repr__(self) -> str:
        return self.qualname


@dataclass(eq=False, slots=True)
class Call:
    """A call the unpickler would make: ``func(*args)`` (REDUCE, NEWOBJ, INST, OBJ)."""

    func: Any
    args: Any
    offset: int
    opcode: str
    kwargs: Any = None
    #: the argument of a BUILD applied to the result (``__setstate__``), if any
    state: Any = None
    #: values APPENDed / SETITEMed onto the result (``obj.append`` / ``obj[k] = v``)
    items: list[Any] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class PersistentRef:
    """A persistent id; torch uses it for storages: ('storage', type, key, location, numel)."""

    pid: Any
    offset: int


@dataclass(eq=False, slots=True)
class Unknown:
    """A value the machine cannot know statically; ``why`` says where it came from."""

    why: str
    offset: int


class PDict(dict[Any, Any]):
    """A dict built by the pickle; ``type_name`` is set for dict subclasses
    (``collections.OrderedDict``) and ``state`` for a BUILD applied to it.

    The defaults are class attributes (no ``__init__`` of our own): a bomb of a million
    empty dicts then costs what a million dicts cost, not a Python call each.
    """

    type_name: str | None = None
    state: Any = None


class PSet(list[Any]):
    """A set or frozenset from the pickle (kept as a list: items may be unhashable)."""

    frozen: bool = False


@dataclass(eq=False)
class Unhashable:
    """Stands in for a dict key the pickle built from an unhashable value."""

    value: Any


@dataclass(frozen=True)
class Anomaly:
    """Something no pickler emits and that the scan cannot vet (BUILD on a class, a computed
    import). Always unsafe: the real unpickler would do something we cannot see."""

    message: str
    offset: int


@dataclass(frozen=True)
class Stop:
    """Where decoding ended without reaching STOP, or where the C unpickler would raise.

    ``kind``: ``truncated``, ``malformed`` (the C unpickler raises the same way) or
    ``budget`` (too large to vet: torch would go on, we did not).
    """

    message: str
    offset: int
    kind: str


@dataclass
class PickleResult:
    value: Any
    #: the last PROTO seen (0 without one)
    protocol: int
    globals: list[Global]
    calls: list[Call]
    anomalies: list[Anomaly]
    persistent_ids: list[PersistentRef]
    start: int
    end: int
    n_ops: int
    #: decoding ended here without STOP (None when STOP was reached)
    stop: Stop | None = None
    #: the first point where torch.load's unpickler raises although decoding went on (a
    #: string that is not UTF-8, a frame longer than the data): what follows runs only
    #: under other loaders, and is still judged
    torch_stop: Stop | None = None
    #: a FRAME runs past STOP: where a following pickle starts depends on buffering
    frame_past_stop: bool = False

    @property
    def complete(self) -> bool:
        return self.stop is None


_PLAIN: set[type] = {type(None), bool, int, float, complex, str, bytes, bytearray, list,
                     tuple, dict, PDict, PSet}  # fmt: skip


def is_plain(value: Any) -> bool:
    """A value the machine knows exactly: not a record of an import, a call or an unknown."""
    if type(value) in _PLAIN:
        return True
    from torchwise.ckpt.picklevm.source import SkippedBytes, SkippedText

    return isinstance(value, (SkippedBytes, SkippedText))
