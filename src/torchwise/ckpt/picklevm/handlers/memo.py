"""The memo: PUT, BINPUT, LONG_BINPUT, MEMOIZE and the GETs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchwise.ckpt.picklevm import ctext
from torchwise.ckpt.picklevm.registry import PickleStop, opcode

if TYPE_CHECKING:
    from torchwise.ckpt.picklevm.machine import Machine


@opcode(b"p", "PUT")
def load_put(m: Machine) -> None:
    line = m.src.line()
    if len(line) < 2:
        raise PickleStop("pickle data was truncated (PUT)")
    value = m.top()  # _pickle.c checks the stack before parsing the key
    try:
        key = ctext.parse_memo_key(line)
    except ctext.TextError as exc:
        raise PickleStop(str(exc)) from None
    if key < 0:
        raise PickleStop("negative PUT argument")
    m.memo_put(key, value)


@opcode(b"q", "BINPUT")
def load_binput(m: Machine) -> None:
    key = m.src.u8()
    m.memo_put(key, m.top())


@opcode(b"r", "LONG_BINPUT")
def load_long_binput(m: Machine) -> None:
    key = m.src.u32()
    m.memo_put(key, m.top())


@opcode(b"\x94", "MEMOIZE")
def load_memoize(m: Machine) -> None:
    m.memo_put(len(m.memo), m.top())


@opcode(b"g", "GET")
def load_get(m: Machine) -> None:
    m.stack.append(m.memo_get(m.line_arg(ctext.parse_memo_key)))


@opcode(b"h", "BINGET")
def load_binget(m: Machine) -> None:
    m.stack.append(m.memo_get(m.src.u8()))


@opcode(b"j", "LONG_BINGET")
def load_long_binget(m: Machine) -> None:
    m.stack.append(m.memo_get(m.src.u32()))
