"""Text opcode arguments: the machine reads them exactly as CPython's C unpickler does.

The oracle is the real C unpickler (``pickle.Unpickler``) with ``find_class``
refusing everything, run on pickles that hold nothing but one text opcode: no
global can be imported and so nothing can be called.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from torchwise.ckpt.picklevm.machine import run_pickle


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError("no globals in these tests")


def c_unpickler(blob: bytes, encoding: str = "utf-8") -> tuple[bool, Any]:
    try:  # (an unknown escape in STRING is a DeprecationWarning in C too)
        return True, _NoGlobals(io.BytesIO(blob), encoding=encoding).load()
    except Exception as exc:  # what the C unpickler raises is the expected outcome
        return False, type(exc).__name__


def machine(blob: bytes) -> tuple[bool, Any]:
    result = run_pickle(io.BytesIO(blob))
    if not result.complete or result.torch_stop is not None:
        return False, result.stop or result.torch_stop
    return True, result.value


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b  # NaN
    return type(a) is type(b) and a == b


_ALPHABET = b"0123456789+-_ \t\x00xXoObBlLeE.infaINFAy'\"\\\xc3\xa9\xff\r"
_lines = st.lists(st.sampled_from(list(_ALPHABET)), max_size=12).map(bytes)


def check(opcode: bytes, line: bytes) -> None:
    blob = opcode + line + b"\n."
    ok_c, value_c = c_unpickler(blob)
    ok_m, value_m = machine(blob)
    assert ok_c == ok_m, (blob, value_c, value_m)
    if ok_c:
        assert same(value_c, value_m), (blob, value_c, value_m)


@settings(max_examples=150, deadline=None)
@given(_lines)
@example(b"0x1f")
@example(b"017")
@example(b" 01")
@example(b"+1")
@example(b"5\x00junk")
@example(b"1_000")
@example(b"0b101")
@example(b"99999999999999999999999")
@example(b"00")
@example(b"08")
def test_int(line: bytes) -> None:
    check(b"I", line)


@settings(max_examples=100, deadline=None)
@given(_lines)
@example(b"12L")
@example(b"0x1fL")
@example(b"1\x00L")
@example(b"L")
def test_long(line: bytes) -> None:
    check(b"L", line)


@settings(max_examples=100, deadline=None)
@given(_lines)
@example(b"inf")
@example(b"-Infinity")
@example(b"nan")
@example(b"1e999")
@example(b"1_0")
@example(b" 1")
@example(b"1.5\x00x")
@example(b"0x1p3")
def test_float(line: bytes) -> None:
    check(b"F", line)


@settings(max_examples=100, deadline=None)
@given(_lines)
@example(b"'\\xc3\\xa9'")
@example(b"'\\xff'")
@example(b"'abc\"")
@example(b"'\\x4'")
@example(b"'\\q'")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_string(line: bytes) -> None:
    check(b"S", line)


@settings(max_examples=100, deadline=None)
@given(_lines)
@example(b"\\u00e9")
@example(b"\\u12")
@example(b"\xc3\xa9")
def test_unicode(line: bytes) -> None:
    check(b"V", line)


@settings(max_examples=80, deadline=None)
@given(_lines)
@example(b" 0")
@example(b"0_0")
@example(b"-1")
def test_put_and_get(line: bytes) -> None:
    blob = b"N" + b"p" + line + b"\n" + b"0" + b"g" + line + b"\n."
    assert c_unpickler(blob)[0] == machine(blob)[0], blob


@pytest.mark.parametrize(
    "blob",
    [
        b"(I1\nI2\nt.",
        b"I01\n.",  # True: three bytes with the newline
        b"I00\n.",  # False
        b"I+1\n.",  # strtol reads +1, and len == 3: True
        b"(I1\nI2\ndl.",  # DICT, then LIST without a MARK: both raise
    ],
)
def test_documented_spellings(blob: bytes) -> None:
    ok_c, value_c = c_unpickler(blob)
    ok_m, value_m = machine(blob)
    assert ok_c == ok_m, (value_c, value_m)
    if ok_c:
        assert value_c == value_m and type(value_c) is type(value_m)
