"""One handler per pickle opcode: the machine's method table.

Each handler does what ``Modules/_pickle.c``'s ``load_<name>`` does to the stack,
mark stack and memo, with its checks in the same order, so the machine raises
(:class:`PickleStop`) exactly where the C unpickler raises. The table is
:data:`DISPATCH` (opcode byte -> handler), filled by the :func:`opcode`
decorator; the machine's loop is a lookup and a call.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchwise.ckpt import ctext
from torchwise.ckpt.budgets import BudgetExceeded
from torchwise.ckpt.values import (
    Unknown,
)

if TYPE_CHECKING:
    from torchwise.ckpt.pickle_vm import Machine


class PickleStop(Exception):
    """The C unpickler raises here; decoding ends."""

    def __init__(self, message: str, kind: str = "malformed") -> None:
        super().__init__(message)
        self.kind = kind


Handler = Callable[["Machine"], bool | None]
#: opcode byte -> handler; a handler returns True on STOP
DISPATCH: dict[int, Handler] = {}
NAMES: dict[int, str] = {}
_INT4 = struct.Struct("<i")
_FLOAT8 = struct.Struct(">d")
_HIGHEST_PROTOCOL = 5


def opcode(code: bytes, name: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        DISPATCH[code[0]] = handler
        NAMES[code[0]] = name
        return handler

    return register


def text(m: Machine, parse: Callable[[bytes], Any]) -> Any:
    try:
        return parse(m.src.line())
    except ctext.TextError as exc:
        raise PickleStop(str(exc)) from None


# --- stack and marks ------------------------------------------------------------------


@opcode(b"(", "MARK")
def load_mark(m: Machine) -> None:
    if len(m.metastack) >= m.budgets.max_depth:
        raise BudgetExceeded("the MARK nesting", m.budgets.max_depth)
    m.metastack.append(m.stack)
    m.stack = []


@opcode(b"0", "POP")
def load_pop(m: Machine) -> None:
    # _pickle.c: an empty segment above the top mark pops the mark itself.
    if m.stack:
        m.stack.pop()
    elif m.metastack:
        m.stack = m.metastack.pop()
    else:
        raise PickleStop("unpickling stack underflow")


@opcode(b"1", "POP_MARK")
def load_pop_mark(m: Machine) -> None:
    m.pop_mark()


@opcode(b"2", "DUP")
def load_dup(m: Machine) -> None:
    m.stack.append(m.top())


@opcode(b".", "STOP")
def load_stop(m: Machine) -> bool:
    m.result.value = m.pop()
    return True


# --- constants and numbers ----------------------------------------------------------


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
    m.stack.append(text(m, ctext.parse_int))


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
    m.stack.append(text(m, ctext.parse_long))


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


# --- strings and bytes ----------------------------------------------------------------


@opcode(b"S", "STRING")
def load_string(m: Machine) -> None:
    m.stack.append(m.decode_str(text(m, ctext.parse_string)))


@opcode(b"T", "BINSTRING")
def load_binstring(m: Machine) -> None:
    m.stack.append(m.counted(4, "string"))


@opcode(b"U", "SHORT_BINSTRING")
def load_short_binstring(m: Machine) -> None:
    m.stack.append(m.counted(1, "string"))


@opcode(b"V", "UNICODE")
def load_unicode(m: Machine) -> None:
    m.stack.append(text(m, ctext.parse_unicode))


@opcode(b"X", "BINUNICODE")
def load_binunicode(m: Machine) -> None:
    m.stack.append(m.text(m.src.u32()))


@opcode(b"\x8c", "SHORT_BINUNICODE")
def load_short_binunicode(m: Machine) -> None:
    m.stack.append(m.text(m.src.u8()))


@opcode(b"\x8d", "BINUNICODE8")
def load_binunicode8(m: Machine) -> None:
    m.stack.append(m.counted(8, "text"))


@opcode(b"C", "SHORT_BINBYTES")
def load_short_binbytes(m: Machine) -> None:
    m.stack.append(m.counted(1, "bytes"))


@opcode(b"B", "BINBYTES")
def load_binbytes(m: Machine) -> None:
    m.stack.append(m.counted(4, "bytes"))


@opcode(b"\x8e", "BINBYTES8")
def load_binbytes8(m: Machine) -> None:
    m.stack.append(m.counted(8, "bytes"))


@opcode(b"\x96", "BYTEARRAY8")
def load_bytearray8(m: Machine) -> None:
    m.stack.append(m.counted(8, "bytearray"))


@opcode(b"\x97", "NEXT_BUFFER")
def load_next_buffer(m: Machine) -> None:
    m.soft_stop("an out-of-band buffer, but torch.load passes no buffers= (it raises here)")
    m.stack.append(Unknown("an out-of-band buffer (protocol 5)", m.at))


@opcode(b"\x98", "READONLY_BUFFER")
def load_readonly_buffer(m: Machine) -> None:
    m.top()  # the object is wrapped in a memoryview; its value does not change


# The registry imports its members, so importing it fills DISPATCH.
from torchwise.ckpt import handlers_containers, handlers_objects  # noqa: E402,F401
