"""Containers: tuples, lists, dicts, sets and the opcodes that fill them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchwise.ckpt.picklevm.registry import PickleStop, opcode
from torchwise.ckpt.picklevm.values import (
    Call,
    Global,
    PDict,
    PersistentRef,
    PSet,
    Unhashable,
    Unknown,
)

if TYPE_CHECKING:
    from torchwise.ckpt.picklevm.machine import Machine


# --- containers -----------------------------------------------------------------------


@opcode(b")", "EMPTY_TUPLE")
def load_empty_tuple(m: Machine) -> None:
    m.stack.append(())


def _tuple_n(m: Machine, n: int) -> None:
    if len(m.stack) < n:
        raise PickleStop("unpickling stack underflow")
    items = tuple(m.stack[len(m.stack) - n :])
    del m.stack[len(m.stack) - n :]
    m.stack.append(items)


@opcode(b"\x85", "TUPLE1")
def load_tuple1(m: Machine) -> None:
    _tuple_n(m, 1)


@opcode(b"\x86", "TUPLE2")
def load_tuple2(m: Machine) -> None:
    _tuple_n(m, 2)


@opcode(b"\x87", "TUPLE3")
def load_tuple3(m: Machine) -> None:
    _tuple_n(m, 3)


@opcode(b"t", "TUPLE")
def load_tuple(m: Machine) -> None:
    items = m.pop_mark()  # before touching m.stack: the mark restores it
    m.stack.append(tuple(items))


@opcode(b"]", "EMPTY_LIST")
def load_empty_list(m: Machine) -> None:
    m.stack.append([])


@opcode(b"l", "LIST")
def load_list(m: Machine) -> None:
    items = m.pop_mark()  # first: the mark restores the stack below it
    m.stack.append(items)


@opcode(b"}", "EMPTY_DICT")
def load_empty_dict(m: Machine) -> None:
    m.stack.append(PDict())


@opcode(b"d", "DICT")
def load_dict(m: Machine) -> None:
    items = m.pop_mark()
    if len(items) % 2:
        raise PickleStop("odd number of items for DICT")
    mapping = PDict()
    _set_items(m, mapping, items)
    m.stack.append(mapping)


@opcode(b"\x8f", "EMPTY_SET")
def load_empty_set(m: Machine) -> None:
    m.stack.append(PSet())


@opcode(b"\x91", "FROZENSET")
def load_frozenset(m: Machine) -> None:
    frozen = PSet(m.pop_mark())
    frozen.frozen = True
    m.stack.append(frozen)


def _target_below_mark(m: Machine) -> tuple[list[Any], Any]:
    """(items after the mark, the object below it): do_append / do_setitems' checks."""
    items = m.pop_mark()
    if not m.stack:
        raise PickleStop("unpickling stack underflow")
    return items, m.stack[-1]


@opcode(b"a", "APPEND")
def load_append(m: Machine) -> None:
    if len(m.stack) < 2:
        raise PickleStop("unpickling stack underflow")
    value = m.stack.pop()
    _extend(m, m.stack[-1], [value], "APPEND")


@opcode(b"e", "APPENDS")
def load_appends(m: Machine) -> None:
    items, target = _target_below_mark(m)
    if items:
        _extend(m, target, items, "APPENDS")


@opcode(b"\x90", "ADDITEMS")
def load_additems(m: Machine) -> None:
    items, target = _target_below_mark(m)
    if items:
        _extend(m, target, items, "ADDITEMS")


@opcode(b"s", "SETITEM")
def load_setitem(m: Machine) -> None:
    if len(m.stack) < 3:
        raise PickleStop("unpickling stack underflow")
    value = m.stack.pop()
    key = m.stack.pop()
    _set_items(m, m.stack[-1], [key, value])


@opcode(b"u", "SETITEMS")
def load_setitems(m: Machine) -> None:
    items, target = _target_below_mark(m)
    if not items:
        return
    if len(items) % 2:
        raise PickleStop("odd number of items for SETITEMS")
    _set_items(m, target, items)


def _extend(m: Machine, target: Any, items: list[Any], name: str) -> None:
    if isinstance(target, list):  # list or PSet
        target.extend(items)
    elif isinstance(target, Call):
        target.items.extend(items)  # obj.extend / obj.append / obj.add, judged with obj
    elif isinstance(target, (Global, PersistentRef, Unknown)):
        m.anomaly(f"{name} onto {describe(target)}: it calls that object's methods")
    else:
        m.soft_stop(f"{name} onto a {type(target).__name__} (the unpickler raises)")


def _set_items(m: Machine, target: Any, items: list[Any]) -> None:
    pairs = list(zip(items[::2], items[1::2], strict=True))
    if isinstance(target, dict):
        for key, value in pairs:
            try:
                target[key] = value
            except TypeError:  # an unhashable key: the unpickler raises; keep judging
                m.soft_stop("an unhashable dict key (the unpickler raises)")
                target[Unhashable(key)] = value
    elif isinstance(target, Call):
        target.items.extend(pairs)
    elif isinstance(target, (Global, PersistentRef, Unknown)):
        m.anomaly(f"SETITEM onto {describe(target)}: it calls that object's __setitem__")
    else:
        m.soft_stop(f"SETITEM onto a {type(target).__name__} (the unpickler raises)")


def describe(value: Any) -> str:
    if isinstance(value, Global):
        return f"the global {value.qualname} itself"
    if isinstance(value, PersistentRef):
        return "a persistent-id object"
    return "a value the scan cannot know"
