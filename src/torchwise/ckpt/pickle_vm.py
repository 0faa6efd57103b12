"""A symbolic pickle machine: rebuilds a pickle's object graph without running it.

:func:`torchwise.ckpt.opcodes.decode` parses opcodes exactly as
``pickletools.genops`` does (only faster). On top of it this module keeps
the unpickler's stack, mark stack and memo exactly as ``pickle.Unpickler`` does,
but every opcode that would import or call something (``GLOBAL``,
``STACK_GLOBAL``, ``INST``, ``OBJ``, ``REDUCE``, ``NEWOBJ``, ``BUILD``,
persistent ids, extension codes) produces an inert record instead. Plain data
(numbers, strings, lists, tuples, dicts, sets) is rebuilt as real Python values,
so a ``STACK_GLOBAL`` whose module and name strings come through the memo
resolves to the same name the real unpickler would import.

Nothing here imports a module named by the pickle or calls anything from it.
"""

from __future__ import annotations

import _compat_pickle
from dataclasses import dataclass, field
from typing import IO, Any

from torchwise.ckpt.opcodes import decode


class PickleParseError(Exception):
    """The byte stream is not a well-formed pickle.

    ``partial`` holds what was rebuilt before the error: a real unpickler would
    already have run every call seen up to that point, so scanners still judge it.
    """

    def __init__(self, message: str, offset: int, partial: PickleResult) -> None:
        super().__init__(message)
        self.offset = offset
        self.partial = partial


@dataclass(eq=False)
class Global:
    """``module.name`` as the unpickler would import it (``find_class``)."""

    module: str
    name: str
    offset: int
    opcode: str
    #: the name after Python 2 -> 3 import fixing (``__builtin__`` -> ``builtins``)
    fixed_module: str = ""
    fixed_name: str = ""

    @property
    def qualname(self) -> str:
        return f"{self.fixed_module or self.module}.{self.fixed_name or self.name}"

    def __repr__(self) -> str:
        return self.qualname


@dataclass(eq=False)
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


@dataclass(eq=False)
class PersistentRef:
    """A persistent id; torch uses it for storages: ('storage', type, key, location, numel)."""

    pid: Any
    offset: int


class PDict(dict[Any, Any]):
    """A dict built by the pickle; ``type_name`` is set for dict subclasses
    (``collections.OrderedDict``) and ``state`` for a BUILD applied to it."""

    type_name: str | None = None
    state: Any = None


class PSet(list[Any]):
    """A set or frozenset from the pickle (kept as a list: items may be unhashable)."""

    frozen: bool = False


@dataclass(eq=False)
class Unhashable:
    """Stands in for a dict key the pickle built from an unhashable value."""

    value: Any


@dataclass(eq=False)
class Anomaly:
    """Something a benign pickler never emits (BUILD on a class, a bad memo key)."""

    message: str
    offset: int


@dataclass
class PickleResult:
    value: Any
    protocol: int
    globals: list[Global]
    calls: list[Call]
    anomalies: list[Anomaly]
    persistent_ids: list[PersistentRef]
    start: int
    end: int
    n_ops: int


#: types whose zero-argument construction is just an empty mapping
_DICT_TYPES = {"collections.OrderedDict", "builtins.dict", "collections.Counter"}
_MARK = object()


def _fix_import(module: str, name: str) -> tuple[str, str]:
    # What Unpickler(fix_imports=True) does for protocol < 3 pickles.
    if (module, name) in _compat_pickle.NAME_MAPPING:
        fixed: tuple[str, str] = _compat_pickle.NAME_MAPPING[(module, name)]
        return fixed
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


class _Machine:
    def __init__(self, start: int) -> None:
        self.stack: list[Any] = []
        self.metastack: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.result = PickleResult(None, 0, [], [], [], [], start, start, 0)

    # --- stack helpers -------------------------------------------------------
    def pop(self) -> Any:
        return self.stack.pop()

    def pop_mark(self) -> list[Any]:
        items = self.stack
        self.stack = self.metastack.pop()
        return items

    def make_global(self, module: str, name: str, offset: int, opcode: str) -> Global:
        fm, fn = _fix_import(module, name)
        glob = Global(module, name, offset, opcode, fm, fn)
        self.result.globals.append(glob)
        return glob

    def call(self, func: Any, args: Any, offset: int, opcode: str, kwargs: Any = None) -> Any:
        call = Call(func, args, offset, opcode, kwargs)
        self.result.calls.append(call)
        if isinstance(func, Global) and func.qualname in _DICT_TYPES and args in ((), []):
            # OrderedDict() then SETITEMS: keep it a real mapping so keys resolve,
            # while the call stays recorded for the scanner.
            mapping = PDict()
            mapping.type_name = func.qualname
            return mapping
        return call

    # --- the opcodes that are not plain pushes ---------------------------------
    def step(self, name: str, arg: Any, pos: int) -> bool:
        """Apply one opcode; returns True on STOP."""
        stack = self.stack
        # The memo and push opcodes are most of a torch pickle: test them first.
        if name in _PUT:
            self.memo[int(arg)] = stack[-1]
        elif name in _PUSH_ARG:
            stack.append(arg)
        elif name in _GET:
            key = int(arg)
            if key not in self.memo:
                raise PickleParseError(
                    f"memo key {key} is read before it is written", pos, self.result
                )
            stack.append(self.memo[key])
        elif name in _CONSTANTS:
            stack.append(_CONSTANTS[name])
        elif name == "EMPTY_LIST":
            stack.append([])
        elif name == "EMPTY_DICT":
            stack.append(PDict())
        elif name == "EMPTY_SET":
            stack.append(PSet())
        elif name == "MARK":
            self.metastack.append(stack)
            self.stack = []
        elif name == "POP":
            if stack:
                stack.pop()
            else:
                self.pop_mark()
        elif name == "POP_MARK":
            self.pop_mark()
        elif name == "DUP":
            stack.append(stack[-1])
        elif name == "MEMOIZE":
            self.memo[len(self.memo)] = stack[-1]
        elif name in _TUPLE_N:
            n = _TUPLE_N[name]
            items = stack[len(stack) - n :] if n else []
            del stack[len(stack) - n :]
            if len(items) != n:
                raise IndexError
            self.stack.append(tuple(items))
        elif name in ("TUPLE", "LIST"):
            items = self.pop_mark()  # before touching self.stack: the mark restores it
            self.stack.append(tuple(items) if name == "TUPLE" else items)
        elif name == "FROZENSET":
            items = self.pop_mark()
            frozen = PSet(items)
            frozen.frozen = True
            self.stack.append(frozen)
        elif name == "DICT":
            items = self.pop_mark()
            mapping = PDict()
            self._set_items(mapping, items)
            self.stack.append(mapping)
        elif name == "APPEND":
            value = self.pop()
            self._extend(self.stack[-1], [value])
        elif name == "APPENDS" or name == "ADDITEMS":
            items = self.pop_mark()
            self._extend(self.stack[-1], items)
        elif name == "SETITEM":
            value = self.pop()
            key = self.pop()
            self._set_items(self.stack[-1], [key, value])
        elif name == "SETITEMS":
            items = self.pop_mark()
            self._set_items(self.stack[-1], items)
        else:
            return self.step_object(name, arg, pos)
        return False

    def step_object(self, name: str, arg: Any, pos: int) -> bool:
        stack = self.stack
        if name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            stack.append(self.make_global(module, attr, pos, name))
        elif name == "STACK_GLOBAL":
            attr = self.pop()
            module = self.pop()
            if not (isinstance(module, str) and isinstance(attr, str)):
                # The real unpickler refuses this; record it, it is never benign.
                self.result.anomalies.append(
                    Anomaly("STACK_GLOBAL with a module or name that is not a string", pos)
                )
                module, attr = f"<computed {module!r}>", f"<computed {attr!r}>"
            stack.append(self.make_global(module, attr, pos, name))
        elif name in ("EXT1", "EXT2", "EXT4"):
            # copyreg's extension registry maps the code to any importable callable.
            stack.append(self.make_global("copyreg._extension_registry", str(arg), pos, name))
        elif name == "REDUCE":
            args = self.pop()
            func = self.pop()
            stack.append(self.call(func, args, pos, name))
        elif name == "NEWOBJ":
            args = self.pop()
            cls = self.pop()
            stack.append(self.call(cls, args, pos, name))
        elif name == "NEWOBJ_EX":
            kwargs = self.pop()
            args = self.pop()
            cls = self.pop()
            stack.append(self.call(cls, args, pos, name, kwargs))
        elif name == "INST":
            module, _, attr = str(arg).partition(" ")
            args = self.pop_mark()
            cls = self.make_global(module, attr, pos, name)
            self.stack.append(self.call(cls, tuple(args), pos, name))
        elif name == "OBJ":
            items = self.pop_mark()
            if not items:
                raise IndexError
            self.stack.append(self.call(items[0], tuple(items[1:]), pos, name))
        elif name == "BUILD":
            state = self.pop()
            target = stack[-1]
            if isinstance(target, (Call, PDict)):
                target.state = state
            elif isinstance(target, Global):
                self.result.anomalies.append(
                    Anomaly(f"BUILD sets attributes on the class {target.qualname} itself", pos)
                )
            else:
                self.result.anomalies.append(
                    Anomaly(f"BUILD on a {type(target).__name__} value", pos)
                )
        elif name == "PERSID":
            ref = PersistentRef(arg, pos)
            self.result.persistent_ids.append(ref)
            stack.append(ref)
        elif name == "BINPERSID":
            ref = PersistentRef(self.pop(), pos)
            self.result.persistent_ids.append(ref)
            stack.append(ref)
        elif name == "NEXT_BUFFER":
            stack.append(Anomaly("out-of-band buffer (protocol 5)", pos))
        elif name in ("READONLY_BUFFER", "FRAME"):
            pass
        elif name == "PROTO":
            self.result.protocol = int(arg)
        elif name == "STOP":
            self.result.value = self.pop()
            return True
        else:  # pragma: no cover - genops knows no other opcode
            raise PickleParseError(f"unsupported opcode {name}", pos, self.result)
        return False

    def _extend(self, target: Any, items: list[Any]) -> None:
        if isinstance(target, list):  # list or PSet
            target.extend(items)
        elif isinstance(target, Call):
            target.items.extend(items)
        else:
            self.result.anomalies.append(Anomaly(f"APPEND onto a {type(target).__name__}", -1))

    def _set_items(self, target: Any, items: list[Any]) -> None:
        if len(items) % 2:
            raise IndexError
        pairs = zip(items[::2], items[1::2], strict=True)
        if isinstance(target, dict):
            for key, value in pairs:
                try:
                    target[key] = value
                except TypeError:  # unhashable key built by the pickle
                    target[Unhashable(key)] = value
        elif isinstance(target, Call):
            target.items.extend(pairs)
        else:
            self.result.anomalies.append(Anomaly(f"SETITEM onto a {type(target).__name__}", -1))


_PUSH_ARG = {
    "INT",
    "BININT",
    "BININT1",
    "BININT2",
    "LONG",
    "LONG1",
    "LONG4",
    "STRING",
    "BINSTRING",
    "SHORT_BINSTRING",
    "BINBYTES",
    "SHORT_BINBYTES",
    "BINBYTES8",
    "BYTEARRAY8",
    "UNICODE",
    "SHORT_BINUNICODE",
    "BINUNICODE",
    "BINUNICODE8",
    "FLOAT",
    "BINFLOAT",
}
_PUT = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_GET = frozenset({"GET", "BINGET", "LONG_BINGET"})
_CONSTANTS: dict[str, Any] = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}
_TUPLE_N = {"EMPTY_TUPLE": 0, "TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}


def run_pickle(stream: IO[bytes], start: int | None = None, rewind: bool = False) -> PickleResult:
    """Rebuild one pickle from ``stream`` (at offset ``start``, default its tell()).

    Stops after the STOP opcode (``rewind`` seeks the stream back to just after it).
    Raises :class:`PickleParseError` on a malformed or truncated pickle.
    """
    begin = stream.tell() if start is None else start
    machine = _Machine(begin)
    pos = begin
    try:
        for name, arg, pos in decode(stream, begin, rewind):
            machine.result.n_ops += 1
            if machine.step(name, arg, pos):
                machine.result.end = pos + 1  # STOP is one byte
                return machine.result
    except PickleParseError:
        raise
    except (IndexError, KeyError):
        raise PickleParseError(
            f"malformed pickle: stack underflow at opcode offset {pos}", pos, machine.result
        ) from None
    except ValueError as exc:  # genops: unknown opcode, truncated argument, bad text
        message = str(exc).splitlines()[0]
        if any(s in message for s in ("exhausted", "remain", "not enough data", "no newline")):
            message = f"truncated pickle ({message})"
        raise PickleParseError(message, pos, machine.result) from None
    raise PickleParseError("truncated pickle: no STOP opcode", pos, machine.result)
