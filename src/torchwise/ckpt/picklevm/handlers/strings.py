"""Strings, bytes and buffers: STRING through BYTEARRAY8, NEXT_BUFFER, READONLY_BUFFER."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchwise.ckpt.picklevm import ctext
from torchwise.ckpt.picklevm.registry import opcode
from torchwise.ckpt.picklevm.values import Unknown

if TYPE_CHECKING:
    from torchwise.ckpt.picklevm.machine import Machine


@opcode(b"S", "STRING")
def load_string(m: Machine) -> None:
    m.stack.append(m.decode_str(m.line_arg(ctext.parse_string)))


@opcode(b"T", "BINSTRING")
def load_binstring(m: Machine) -> None:
    m.stack.append(m.counted(4, "string"))


@opcode(b"U", "SHORT_BINSTRING")
def load_short_binstring(m: Machine) -> None:
    m.stack.append(m.counted(1, "string"))


@opcode(b"V", "UNICODE")
def load_unicode(m: Machine) -> None:
    m.stack.append(m.line_arg(ctext.parse_unicode))


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
