"""The opcode table: which handler runs for each pickle opcode, found explicitly.

A handler is a function in one of the modules named in :data:`HANDLER_MODULES`
(``torchwise.ckpt.picklevm.handlers.<name>``), labelled with :func:`opcode`:

    @opcode(b"(", "MARK")
    def load_mark(m: Machine) -> None: ...

The label does nothing else: nothing registers itself when it is imported.
:func:`opcode_table` imports the listed modules in order and collects the
labelled functions into an :class:`OpcodeTable` (byte -> handler, like
``pickle.Unpickler.dispatch``); two handlers for one byte, or a listed module
without any, fail there. Each handler does what ``Modules/_pickle.c``'s
``load_<name>`` does to the stack, mark stack and memo, with its checks in the
same order, and raises :class:`PickleStop` exactly where the C unpickler raises.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from torchwise.ckpt.picklevm.machine import Machine

#: the handler modules, in the order pickletools documents their opcodes
HANDLER_MODULES = ("stack", "numbers", "strings", "containers", "memo", "objects", "framing")

Handler = Callable[["Machine"], bool | None]
H = TypeVar("H", bound=Handler)
_LABEL = "__pickle_opcode__"


class PickleStop(Exception):
    """The C unpickler raises here; decoding ends."""

    def __init__(self, message: str, kind: str = "malformed") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class OpcodeTable:
    #: opcode byte -> handler; a handler returns True on STOP
    handlers: dict[int, Handler]
    #: opcode byte -> its name in pickletools (``MARK``, ``BINUNICODE``, ...)
    names: dict[int, str]


def opcode(code: bytes, name: str) -> Callable[[H], H]:
    """Label a handler with the opcode byte it implements (see the module docstring)."""

    def label(handler: H) -> H:
        setattr(handler, _LABEL, (code[0], name))
        return handler

    return label


@functools.cache
def opcode_table() -> OpcodeTable:
    """Every labelled handler of the modules in :data:`HANDLER_MODULES`."""
    handlers: dict[int, Handler] = {}
    names: dict[int, str] = {}
    for module_name in HANDLER_MODULES:
        module = importlib.import_module(f"{__package__}.handlers.{module_name}")
        found = 0
        for value in vars(module).values():
            label = getattr(value, _LABEL, None)
            if label is None or getattr(value, "__module__", None) != module.__name__:
                continue
            code, name = label
            if code in handlers:
                raise RuntimeError(f"two handlers for opcode {name} ({bytes([code])!r})")
            handlers[code], names[code] = value, name
            found += 1
        if not found:
            raise RuntimeError(f"handler module {module_name} labels no opcode")
    return OpcodeTable(handlers, names)
