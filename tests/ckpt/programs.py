"""Hypothesis strategies over pickle opcode sequences, for the differential harness.

A program is a list of statements that leave the stack as they found it,
then one value and STOP. Values are drawn from every opcode family, with the
argument spellings the C unpickler accepts and pickletools does not (``I0x1f``,
``I 017``, ``I5\\0junk``, ``L0b101L``, ``Finf``, escaped ``S'...'``), and now and
then a spelling the C unpickler rejects (so where decoding stops is tested too).
A payload statement calls ``open(marker, 'w')``; the marker path is filled in
when the program is rendered, so frames are measured after it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from craft import glob, touch
from hypothesis import strategies as st

MARKER = "@MARKER@"


@dataclass
class Frame:
    """A FRAME opcode covering the next ``parts`` parts of the program."""

    parts: int


@dataclass
class Program:
    parts: list[bytes | Frame]
    payload: bool
    #: opcodes the C unpickler rejects were mixed in
    broken: bool

    def render(self, marker: str) -> bytes:
        pieces = [p.replace(MARKER.encode(), marker.encode()) if isinstance(p, bytes) else p
                  for p in self.parts]  # fmt: skip
        out = bytearray()
        for i, piece in enumerate(pieces):
            if isinstance(piece, Frame):
                covered = b"".join(
                    p for p in pieces[i + 1 : i + 1 + piece.parts] if isinstance(p, bytes)
                )
                out += b"\x95" + struct.pack("<Q", len(covered))
            else:
                out += piece
        return bytes(out)


_ints = st.integers(-(2**70), 2**70)
_small = st.integers(0, 2**31 - 1)


def _int_spellings(value: int) -> list[bytes]:
    sign = "-" if value < 0 else ""
    mag = abs(value)
    out = [f"I{value}\n".encode(), f"I{sign}0x{mag:x}\n".encode(), f"I {value}\n".encode(),
           f"L{value}L\n".encode(), f"L{sign}0x{mag:X}\n".encode(), f"L{value}\n".encode(),
           f"I{value}\0tail\n".encode(), f"I{sign}0b{mag:b}\n".encode(),
           f"L{sign}0o{mag:o}L\n".encode(), f"I{sign}{mag:_}\n".encode()]  # fmt: skip
    if 0 < mag < 2**62:
        out.append(f"I{sign}0{mag:o}\n".encode())  # octal: strtol only
    if value >= 0:
        out.append(f"I+{value}\n".encode())
    if -(2**31) <= value < 2**31:
        out.append(b"J" + struct.pack("<i", value))
    if 0 <= value < 256:
        out.append(b"K" + bytes([value]))
    if 0 <= value < 65536:
        out.append(b"M" + struct.pack("<H", value))
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    if len(raw) < 256:
        out.append(b"\x8a" + bytes([len(raw)]) + raw)
    return out


@st.composite
def integers(draw: st.DrawFn) -> bytes:
    value = draw(st.one_of(_ints, st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, -(2**63) - 1])))
    return draw(st.sampled_from(_int_spellings(value)))


@st.composite
def floats(draw: st.DrawFn) -> bytes:
    value = draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
    return draw(st.sampled_from([
        b"G" + struct.pack(">d", value), f"F{value!r}\n".encode(), b"Finf\n", b"F-Infinity\n",
        b"Fnan\n", f"F{value:e}\n".encode(), f"F{value}\0x\n".encode(),
    ]))  # fmt: skip


_text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_characters="\\'\n\r"),
                max_size=12)  # fmt: skip


@st.composite
def strings(draw: st.DrawFn) -> bytes:
    text = draw(_text)
    data = text.encode()
    ascii_ = text.encode("ascii", "backslashreplace").decode().replace("\\", "\\\\")
    escaped = "".join(f"\\x{b:02x}" for b in data)
    return draw(st.sampled_from([
        b"X" + struct.pack("<I", len(data)) + data, b"\x8c" + bytes([len(data)]) + data
        if len(data) < 256 else b"N", f"V{text.encode('raw_unicode_escape').decode('latin-1')}\n"
        .encode("latin-1"), f"S'{escaped}'\n".encode(), f'S"{ascii_}"\n'.encode(),
        b"C" + bytes([len(data)]) + data if len(data) < 256 else b"N",
        b"U" + bytes([len(data)]) + data if len(data) < 256 else b"N",
        b"B" + struct.pack("<I", len(data)) + data,
    ]))  # fmt: skip


_EMPTIES = [b"N", b"\x88", b"\x89", b")", b"]", b"}", b"\x8f"]
_atoms = st.one_of(integers(), floats(), strings(), st.sampled_from(_EMPTIES))


@st.composite
def values(draw: st.DrawFn, depth: int = 0) -> bytes:
    if depth > 2 or draw(st.booleans()):
        return draw(_atoms)
    items = draw(st.lists(values(depth + 1), max_size=3))
    kind = draw(st.sampled_from(["tuple", "list", "appends", "dict", "tupleN", "frozenset"]))
    if kind == "tuple":
        return b"(" + b"".join(items) + b"t"
    if kind == "list":
        return b"(" + b"".join(items) + b"l"
    if kind == "appends":
        return b"](" + b"".join(items) + b"e"
    if kind == "frozenset":
        atoms = [b"K" + bytes([i]) for i in range(len(items))]
        return b"(" + b"".join(atoms) + b"\x91"
    if kind == "dict":
        pairs = b"".join(
            b"X" + struct.pack("<I", 1) + bytes([97 + i]) + v for i, v in enumerate(items)
        )
        return b"}(" + pairs + b"u"
    return b"".join(items[:3]) + {0: b")", 1: b"\x85", 2: b"\x86", 3: b"\x87"}[len(items[:3])]


_BROKEN = [b"I0x\n", b"Fabc\n", b"F1_0\n", b"S'\\xff'\n", b"g999\n", b"\xff", b"I\n",
           b"Lx\n", b"S'unterminated\n", b"V\\u12\n"]  # fmt: skip


@st.composite
def programs(draw: st.DrawFn, payload_rate: float = 0.5) -> Program:
    parts: list[bytes | Frame] = []
    if draw(st.booleans()):
        parts.append(b"\x80" + bytes([draw(st.integers(0, 5))]))
    memo: list[int] = []
    keys: set[int] = set()
    payload = broken = False
    for _ in range(draw(st.integers(0, 8))):
        choice = draw(st.integers(0, 99))
        if choice < 40:
            parts.append(draw(values()) + b"0")
        elif choice < 55:
            key = draw(st.integers(0, 300))
            put = draw(st.sampled_from([f"p{key}\n".encode(), b"q" + bytes([key % 256]),
                                        b"r" + struct.pack("<I", key), b"\x94"]))  # fmt: skip
            parts.append(draw(values()) + put + b"0")
            # MEMOIZE stores under the number of entries so far, as _pickle.c does
            stored = len(keys) if put == b"\x94" else key % 256 if put[:1] == b"q" else key
            keys.add(stored)
            memo.append(stored)
        elif choice < 62 and memo:
            key = draw(st.sampled_from(memo))
            parts.append(draw(st.sampled_from([f"g{key}\n".encode(), f"g {key}\n".encode(),
                                               b"j" + struct.pack("<I", key)])) + b"0")  # fmt: skip
        elif choice < 67:
            parts.append(b"\x80" + bytes([draw(st.integers(0, 5))]))
        elif choice < 72:
            parts.append(b"(" + draw(values()) + b"1")  # MARK, value, POP_MARK
        elif choice < 76:
            parts.append(Frame(draw(st.integers(1, 3))))
        elif choice < 80:
            parts.append(draw(values()) + b"2" + b"0" + b"0")  # DUP, POP, POP
        elif choice < 80 + int(20 * payload_rate):
            parts.append(touch(MARKER) + b"0")
            payload = True
        else:
            parts.append(draw(st.sampled_from(_BROKEN)))
            broken = True
    parts.append(draw(values()) + b".")
    return Program(parts, payload, broken)


def global_call(module: str, name: str) -> bytes:
    """A GLOBAL of some other callable, for the policy side of generated programs."""
    return glob(module, name)
