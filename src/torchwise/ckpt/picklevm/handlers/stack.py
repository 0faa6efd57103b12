"""The stack and the mark stack: MARK, POP, POP_MARK, DUP, STOP."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchwise.ckpt.budgets import BudgetExceeded
from torchwise.ckpt.picklevm.registry import PickleStop, opcode

if TYPE_CHECKING:
    from torchwise.ckpt.picklevm.machine import Machine


@opcode(b"(", "MARK")
def load_mark(m: Machine) -> None:
    # weights_only and the C unpickler nest as deep as memory allows: no limit of its own
    # by default (nesting costs opcodes, and their budget, like everything else)
    if m.budgets.max_depth and len(m.metastack) >= m.budgets.max_depth:
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
