"""Protocol and framing: PROTO and FRAME."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchwise.ckpt.picklevm.registry import PickleStop, opcode

if TYPE_CHECKING:
    from torchwise.ckpt.picklevm.machine import Machine

_HIGHEST_PROTOCOL = 5


@opcode(b"\x80", "PROTO")
def load_proto(m: Machine) -> None:
    proto = m.unsigned(1)
    if proto > _HIGHEST_PROTOCOL:
        raise PickleStop(f"unsupported pickle protocol: {proto}")
    m.proto = m.result.protocol = proto


@opcode(b"\x95", "FRAME")
def load_frame(m: Machine) -> None:
    length = m.unsigned(8)
    if m.frame_end > m.at:
        m.anomaly("a FRAME inside another frame: readers disagree on where each ends")
    remaining = m.src.remaining()
    if remaining is not None and length > remaining:
        # The C unpickler reads the whole frame first and raises; the Python one reads on.
        m.soft_stop(f"a FRAME of {length:,} bytes where {remaining:,} remain (torch raises here)")
    m.frame_end = m.src.offset + length
