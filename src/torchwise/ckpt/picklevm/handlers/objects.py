"""Imports, calls and objects: GLOBAL, STACK_GLOBAL, INST, OBJ, REDUCE, NEWOBJ, BUILD, persistent
ids and extension codes. Each becomes an inert record (:mod:`torchwise.ckpt.picklevm.values`)."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from torchwise.ckpt.picklevm import ctext
from torchwise.ckpt.picklevm.handlers.containers import describe
from torchwise.ckpt.picklevm.registry import PickleStop, opcode
from torchwise.ckpt.picklevm.source import SkippedText
from torchwise.ckpt.picklevm.values import Call, Global, PDict, PersistentRef, Unknown, is_plain

if TYPE_CHECKING:
    from torchwise.ckpt.picklevm.machine import Machine

_INT4 = struct.Struct("<i")


# --- imports, calls and objects -------------------------------------------------------


@opcode(b"c", "GLOBAL")
def load_global(m: Machine) -> None:
    module = m.name_line()
    name = m.name_line()
    m.stack.append(m.make_global(module, name, "GLOBAL"))


@opcode(b"\x93", "STACK_GLOBAL")
def load_stack_global(m: Machine) -> None:
    if len(m.stack) < 2:
        raise PickleStop("unpickling stack underflow")
    name = m.stack.pop()
    module = m.stack.pop()
    if type(module) is str and type(name) is str:
        m.stack.append(m.make_global(module, name, "STACK_GLOBAL"))
        return
    if is_plain(module) and is_plain(name) and not _skipped(module) and not _skipped(name):
        raise PickleStop("STACK_GLOBAL requires str")
    m.anomaly("STACK_GLOBAL imports a name the scan cannot know (computed or too long)")
    m.push(
        m.make_global(f"<computed {_short(module)}>", f"<computed {_short(name)}>", "STACK_GLOBAL")
    )


def _ascii_name(line: bytes) -> str:
    return ctext.parse_name(line, "ascii")


def _skipped(value: Any) -> bool:
    return isinstance(value, SkippedText)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


@opcode(b"i", "INST")
def load_inst(m: Machine) -> None:
    args = m.pop_mark()  # _pickle.c looks for the MARK before reading the names
    module = m.line_arg(_ascii_name)
    name = m.line_arg(_ascii_name)
    cls = m.make_global(module, name, "INST")
    m.stack.append(m.call(cls, tuple(args), "INST"))


@opcode(b"o", "OBJ")
def load_obj(m: Machine) -> None:
    items = m.pop_mark()
    if not items:
        raise PickleStop("unpickling stack underflow")
    m.stack.append(m.call(items[0], tuple(items[1:]), "OBJ"))


@opcode(b"R", "REDUCE")
def load_reduce(m: Machine) -> None:
    if len(m.stack) < 2:
        raise PickleStop("unpickling stack underflow")
    args = m.stack.pop()
    func = m.stack.pop()
    m.stack.append(m.call(func, args, "REDUCE"))


@opcode(b"\x81", "NEWOBJ")
def load_newobj(m: Machine) -> None:
    if len(m.stack) < 2:
        raise PickleStop("unpickling stack underflow")
    args = m.stack.pop()
    cls = m.stack.pop()
    m.stack.append(m.call(cls, args, "NEWOBJ"))


@opcode(b"\x92", "NEWOBJ_EX")
def load_newobj_ex(m: Machine) -> None:
    if len(m.stack) < 3:
        raise PickleStop("unpickling stack underflow")
    kwargs = m.stack.pop()
    args = m.stack.pop()
    cls = m.stack.pop()
    m.stack.append(m.call(cls, args, "NEWOBJ_EX", kwargs))


@opcode(b"b", "BUILD")
def load_build(m: Machine) -> None:
    if len(m.stack) < 2:
        raise PickleStop("unpickling stack underflow")
    state = m.stack.pop()
    target = m.stack[-1]
    if isinstance(target, Call) or (isinstance(target, PDict) and target.type_name):
        target.state = state  # the object's own __setstate__ / __dict__ update
    elif isinstance(target, Global):
        m.anomaly(f"BUILD sets attributes on {target.qualname} itself (a class or function)")
    elif isinstance(target, (PersistentRef, Unknown)):
        m.anomaly(f"BUILD on {describe(target)}")
    elif state is not None:
        m.soft_stop(f"BUILD on a {type(target).__name__} (the unpickler raises)")
    if m.on_build is not None:
        m.on_build(m, target)


@opcode(b"P", "PERSID")
def load_persid(m: Machine) -> None:
    ref = PersistentRef(m.line_arg(ctext.parse_persid), m.at)
    m.result.persistent_ids.append(ref)
    m.stack.append(ref)


@opcode(b"Q", "BINPERSID")
def load_binpersid(m: Machine) -> None:
    ref = PersistentRef(m.pop(), m.at)
    m.result.persistent_ids.append(ref)
    m.stack.append(ref)


def _extension(m: Machine, nbytes: int) -> None:
    code = m.unsigned(nbytes) if nbytes < 4 else _INT4.unpack(m.src.take(4))[0]
    if code <= 0:
        raise PickleStop("EXT specifies code <= 0")
    # copyreg's extension registry maps the code to whatever the loading process registered.
    m.stack.append(m.make_global("copyreg._extension_registry", str(code), _EXT[nbytes]))


_EXT = {1: "EXT1", 2: "EXT2", 4: "EXT4"}


@opcode(b"\x82", "EXT1")
def load_ext1(m: Machine) -> None:
    _extension(m, 1)


@opcode(b"\x83", "EXT2")
def load_ext2(m: Machine) -> None:
    _extension(m, 2)


@opcode(b"\x84", "EXT4")
def load_ext4(m: Machine) -> None:
    _extension(m, 4)
