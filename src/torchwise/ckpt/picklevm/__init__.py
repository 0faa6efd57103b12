"""The pickle machine: CPython's C unpickler, opcode for opcode, with every import and call
turned into an inert record (nothing the pickle names is imported or called).

- :mod:`.machine`: the machine and :func:`run_pickle`;
- :mod:`.registry`: the opcode table, built from the handler modules in :mod:`.handlers`;
- :mod:`.source`: the bytes of one pickle, read as ``_Unpickler_Read`` reads them;
- :mod:`.ctext`: protocol 0 text arguments, parsed as ``_pickle.c`` parses them;
- :mod:`.values`: what the machine builds (plain values and inert records).
"""

from torchwise.ckpt.picklevm.machine import Machine, run_pickle
from torchwise.ckpt.picklevm.registry import PickleStop
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.ckpt.picklevm.values import (
    Anomaly,
    Call,
    Global,
    PDict,
    PersistentRef,
    PickleResult,
    PSet,
    Stop,
    Unhashable,
    Unknown,
    is_plain,
)

__all__ = [
    "Anomaly",
    "ByteStream",
    "Call",
    "Global",
    "Machine",
    "PDict",
    "PSet",
    "PersistentRef",
    "PickleResult",
    "PickleStop",
    "Stop",
    "Unhashable",
    "Unknown",
    "is_plain",
    "run_pickle",
]
