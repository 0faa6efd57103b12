"""Constants and numbers: NONE, NEWTRUE/NEWFALSE, INT and its binary forms, LONG, FLOAT."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from torchwise.ckpt.picklevm import ctext
from torchwise.ckpt.picklevm.registry import PickleStop, opcode

if TYPE_CHECKING:
    from torchwise.ckpt.picklevm.machine import Machine

_INT4 = struct.Struct("<i")
_FLOAT8 = struct.Struct(">d")


@opcode(b"N", "NONE")
def load_none(m: Machine) -> None:
    m.stack.append(None)


@opcode(b"\x88", "NEWTRUE")
def load_true(m: Machine) -> None:
    m.stack.append(True)


@opcode(b"\x89", "NEWFALSE")
def load_false(m: Machine) -> None:
    m.stack.append(False)


@opcode(b"I", "INT")
def load_int(m: Machine) -> None:
    m.stack.append(m.line_arg(ctext.parse_int))


@opcode(b"J", "BININT")
def load_binint(m: Machine) -> None:
    m.stack.append(_INT4.unpack(m.src.take(4))[0])


@opcode(b"K", "BININT1")
def load_binint1(m: Machine) -> None:
    m.stack.append(m.unsigned(1))


@opcode(b"M", "BININT2")
def load_binint2(m: Machine) -> None:
    m.stack.append(m.unsigned(2))


@opcode(b"L", "LONG")
def load_long(m: Machine) -> None:
    m.stack.append(m.line_arg(ctext.parse_long))


@opcode(b"\x8a", "LONG1")
def load_long1(m: Machine) -> None:
    m.stack.append(m.counted(1, "long"))


@opcode(b"\x8b", "LONG4")
def load_long4(m: Machine) -> None:
    m.stack.append(m.counted(4, "long"))


@opcode(b"F", "FLOAT")
def load_float(m: Machine) -> None:
    line = m.src.line()
    try:
        m.stack.append(ctext.parse_float(line))
    except ctext.TextError as exc:
        try:  # pickle._Unpickler: float(line[:-1]) takes whitespace and underscores
            value = float(line[:-1])
        except ValueError:
            raise PickleStop(str(exc)) from None
        m.soft_stop(f"{exc} (the C unpickler raises; pickle's Python unpickler reads it)")
        m.stack.append(value)


@opcode(b"G", "BINFLOAT")
def load_binfloat(m: Machine) -> None:
    m.stack.append(_FLOAT8.unpack(m.src.take(8))[0])
