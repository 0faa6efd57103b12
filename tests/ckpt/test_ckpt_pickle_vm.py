"""The symbolic pickle machine rebuilds plain data exactly as pickle.loads does."""

from __future__ import annotations

import io
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchwise.ckpt.picklevm.machine import run_pickle
from torchwise.ckpt.picklevm.values import Call, Global, PDict, PSet

_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | (st.binary(max_size=20))
)
_data = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4)
        | st.frozensets(st.integers(), max_size=3)
    ),
    max_leaves=20,
)


def _plain(value: Any) -> Any:
    """PDict/PSet back to dict/set, and the set/frozenset REDUCEs of protocols < 4."""
    if isinstance(value, PSet):
        return frozenset(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, Call) and isinstance(value.func, Global):
        if value.func.qualname in ("builtins.set", "builtins.frozenset"):
            return frozenset(_plain(v) for v in value.args[0])
        if value.func.qualname == "builtins.bytes" and value.args == ():  # protocol < 3 b""
            return b""
        if value.func.qualname == "_codecs.encode":  # protocol < 3 bytes
            return value.args[0].encode(value.args[1])
    return value


def _as_frozen(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if isinstance(value, dict):
        return {k: _as_frozen(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_frozen(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_as_frozen(v) for v in value)
    return value


@settings(max_examples=60, deadline=None)
@given(_data, st.integers(0, 5))
def test_rebuilds_plain_data_like_pickle(data: Any, protocol: int) -> None:
    blob = pickle.dumps(data, protocol=protocol)
    ours = run_pickle(io.BytesIO(blob))
    assert _plain(ours.value) == _as_frozen(pickle.loads(blob))  # our own data: safe to load
    assert ours.end == len(blob)


@pytest.mark.parametrize("tail", range(1, 60))
def test_a_text_line_that_ends_near_the_end_of_the_stream_is_read_whole(tail: int) -> None:
    # Protocol 0 strings are lines; the reader asks for more bytes than the line needs,
    # and a stream that ends sooner still holds the newline (found by the property test).
    blob = pickle.dumps({"k": "a" * 446, "j": "b" * tail}, protocol=0)
    result = run_pickle(io.BytesIO(blob))
    assert result.end == len(blob)
    assert _plain(result.value) == {"k": "a" * 446, "j": "b" * tail}


@pytest.mark.parametrize("protocol", range(6))
def test_memo_keeps_shared_references(protocol: int) -> None:
    shared = [1, 2]
    value = run_pickle(io.BytesIO(pickle.dumps({"a": shared, "b": shared}, protocol))).value
    assert isinstance(value, PDict)
    assert value["a"] is value["b"]


def test_stack_global_resolves_through_memo() -> None:
    # "posix" and "system" are memoised, popped, then fetched back for STACK_GLOBAL.
    blob = b"\x80\x04\x8c\x05posix\x94" + b"0" + b"\x8c\x06system\x94" + b"0" + b"h\x00h\x01\x93."
    result = run_pickle(io.BytesIO(blob))
    assert [g.qualname for g in result.globals] == ["posix.system"]


def test_python2_names_are_fixed() -> None:
    result = run_pickle(io.BytesIO(b"c__builtin__\neval\n."))
    assert result.globals[0].qualname == "builtins.eval"


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"\x80\x02}q\x00(X\x01\x00\x00", "truncated"),
        (b"\x80\x02h\x05.", "Memo value not found at index 5"),
        (b"\x80\x02R.", "stack underflow"),
        (b"\x80\x02\xff.", "invalid load key"),
        (b"\x80\x02t.", "could not find MARK"),
        (b"\x80\x02(K\x01d.", "odd number of items for DICT"),
        (b"\x80\x06.", "unsupported pickle protocol: 6"),
    ],
)
def test_malformed_pickles_stop_with_the_c_message(blob: bytes, message: str) -> None:
    result = run_pickle(io.BytesIO(blob))
    assert result.stop is not None and message in result.stop.message
    assert not result.complete


def test_a_stop_keeps_what_ran_before_it() -> None:
    blob = b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00ls\x85R}X\x09"
    result = run_pickle(io.BytesIO(blob))
    assert result.stop is not None and result.stop.kind == "truncated"
    [call] = result.calls
    assert call.func.qualname == "posix.system" and call.args == ("ls",)


def test_large_byte_strings_are_skipped_not_kept() -> None:
    from torchwise.ckpt.picklevm.source import LARGE, SkippedBytes

    blob = pickle.dumps({"raw": b"\x00" * (LARGE + 10), "after": 7}, protocol=4)
    value = run_pickle(io.BytesIO(blob)).value
    assert value["raw"] == SkippedBytes(LARGE + 10) and value["after"] == 7


def test_the_opcode_table_covers_every_opcode_pickle_defines() -> None:
    import pickletools

    from torchwise.ckpt.picklevm.registry import opcode_table

    table = opcode_table()
    expected = {op.code.encode("latin-1")[0]: op.name for op in pickletools.opcodes}
    assert table.names == expected


def test_handler_modules_register_nothing_when_imported() -> None:
    """The registry collects handlers explicitly; importing a handler module has no effect."""
    import importlib

    from torchwise.ckpt.picklevm import registry

    module = importlib.import_module("torchwise.ckpt.picklevm.handlers.stack")
    assert not any(name.isupper() and isinstance(v, dict) for name, v in vars(module).items())
    assert registry.HANDLER_MODULES[0] == "stack"
    assert registry.opcode_table().handlers[ord("(")] is module.load_mark
