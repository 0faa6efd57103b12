"""``joblib.load``'s route: its compressed forms and the array data inside its pickles.

``joblib.load(path)`` (joblib 1.x, ``numpy_pickle.py``):

1. picks a decompressor from the first bytes (:mod:`torchwise.ckpt.formats.compressed`):
   a zlib, gzip, bz2, xz, lzma or lz4 file is unpickled from its decompressed
   stream, a ``ZF`` file through the pre-0.10 reader; any other file as it is;
2. unpickles with ``NumpyUnpickler``, a subclass of Python's ``pickle._Unpickler``
   whose BUILD, after building a ``NumpyArrayWrapper``, reads the array's data
   **from the stream itself**: for a dtype with Python objects a nested pickle
   (unpickled on the spot), otherwise a padding byte, that many padding bytes
   (when the wrapper has ``numpy_array_alignment_bytes``) and the raw data. The
   pickle's opcodes go on after it.

So the opcodes joblib runs are not the ones a plain unpickler reads at the same
offsets: the array data is skipped (a plain unpickler would read it as opcodes),
and a nested object-array pickle runs. :func:`skip_array_data` is that BUILD
step for the symbolic machine.
"""

from __future__ import annotations

import math
from typing import Any

from torchwise.ckpt.budgets import BudgetExceeded, Meter
from torchwise.ckpt.formats.compressed import CannotDecompress, DecompressedStream, detect
from torchwise.ckpt.formats.container import Container, PickleMember
from torchwise.ckpt.loaders.names import JOBLIB_LOAD
from torchwise.ckpt.picklevm.machine import Machine, PickleStop, run_pickle
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.ckpt.picklevm.values import Call, Global, PickleResult

#: the class joblib's BUILD recognises (also under its old vendored name)
WRAPPERS = frozenset(
    {
        "joblib.numpy_pickle.NumpyArrayWrapper",
        "sklearn.externals.joblib.numpy_pickle.NumpyArrayWrapper",
    }
)
_RECONSTRUCTOR = "copyreg._reconstructor"
_OBJECT_FLAG = 0x01  # NPY_ITEM_REFCOUNT / NPY_ITEM_HASOBJECT in a dtype's pickled flags


def read_joblib_route(
    container: Container, raw: ByteStream, size: int, head: bytes, meter: Meter
) -> None:
    """Record on ``container`` what joblib.load unpickles from the file."""
    kind = detect(head)
    if kind is None:
        _plain(container, raw, size, meter)
        return
    name = f"{kind}-compressed joblib stream" if kind != "compat" else "joblib ZF stream"
    try:
        stream = DecompressedStream(raw, kind, meter)
    except CannotDecompress as exc:
        container.trick(str(exc), name, 0, "too-large", loaders=(JOBLIB_LOAD,))
        container.route(JOBLIB_LOAD, None)
        return
    try:
        result = run_pickle(stream, 0, meter=meter, seekable=False, on_build=skip_array_data)
    except BudgetExceeded as exc:
        container.trick(f"too large to vet: {exc}", name, 0, "too-large", loaders=(JOBLIB_LOAD,))
        container.route(JOBLIB_LOAD, None)
        return
    if not _decoded_anything(result):
        container.route(JOBLIB_LOAD, f"its {kind} stream holds no pickle")
        return
    if kind != "compat":
        container.format = container.format if container.format != "unknown" else "joblib"
    container.pickles.append(PickleMember(name, "data", (JOBLIB_LOAD,), result))
    container.route(JOBLIB_LOAD, _failure(result))


def _plain(container: Container, raw: ByteStream, size: int, meter: Meter) -> None:
    """An uncompressed file: the pickle at byte 0, read with joblib's BUILD step."""
    first = next((p for p in container.pickles if p.name.startswith("pickle #1 ")), None)
    if first is None:
        container.route(JOBLIB_LOAD, "byte 0 starts no pickle")
        return
    if not any(g.qualname in WRAPPERS for g in first.result.globals):
        first.also(JOBLIB_LOAD)  # the same opcodes a plain unpickler reads
        container.route(JOBLIB_LOAD, _failure(first.result))
        return
    result = run_pickle(raw, 0, meter=meter, size=size, on_build=skip_array_data)
    container.pickles.append(
        PickleMember("pickle at byte 0, as joblib reads it", "data", (JOBLIB_LOAD,), result)
    )
    container.route(JOBLIB_LOAD, _failure(result))


def _decoded_anything(result: PickleResult) -> bool:
    return result.complete or bool(result.globals or result.calls or result.anomalies)


def _failure(result: PickleResult) -> str | None:
    if result.stop is None:
        return None
    return f"{result.stop.message} at byte {result.stop.offset}"


# --- the BUILD step ------------------------------------------------------------------------


def skip_array_data(m: Machine, built: Any) -> None:
    """``NumpyUnpickler.load_build``: read (here: skip or decode) the array after a wrapper."""
    if not (isinstance(built, Call) and _is_wrapper(built)):
        return
    state = built.state
    if not isinstance(state, dict):
        raise PickleStop("joblib's array wrapper has no attributes (joblib fails here)")
    count = _count(state.get("shape"))
    has_object, itemsize = dtype_facts(state.get("dtype"))
    if count is None or has_object is None or (not has_object and itemsize is None):
        _cannot_locate(m, "its shape or dtype is not one the scan can measure")
    if has_object:
        _nested_pickle(m)
        return
    if "numpy_array_alignment_bytes" in state:
        m.src.skip(m.src.u8())
    assert count is not None and itemsize is not None
    m.src.skip(count * itemsize)


def _is_wrapper(call: Call) -> bool:
    func, args = call.func, call.args
    if isinstance(func, Global) and func.qualname in WRAPPERS:
        return True
    # protocols 0-1: copyreg._reconstructor(NumpyArrayWrapper, object, None)
    return (
        isinstance(func, Global)
        and func.qualname == _RECONSTRUCTOR
        and isinstance(args, tuple)
        and bool(args)
        and isinstance(args[0], Global)
        and args[0].qualname in WRAPPERS
    )


def _count(shape: Any) -> int | None:
    if isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape):
        return math.prod(shape)
    return None


def dtype_facts(dtype: Any, depth: int = 0) -> tuple[bool | None, int | None]:
    """(holds Python objects, item size) of a pickled ``numpy.dtype(code, align, copy)``.

    None where the pickle does not say plainly; the caller then cannot locate the data.
    """
    if depth > 16 or not (isinstance(dtype, Call) and isinstance(dtype.args, tuple)):
        return None, None
    code = dtype.args[0] if dtype.args else None
    state = dtype.state if isinstance(dtype.state, tuple) else ()
    if not isinstance(code, str):
        return None, None
    elsize = state[5] if len(state) > 5 and type(state[5]) is int else -1
    flags = state[7] if len(state) > 7 and type(state[7]) is int else 0
    fields = state[4] if len(state) > 4 else None
    has_object: bool | None = code.lstrip("<>|=").startswith("O") or bool(flags & _OBJECT_FLAG)
    if isinstance(fields, dict) and not has_object:
        inner = [dtype_facts(f[0], depth + 1)[0] for f in fields.values() if isinstance(f, tuple)]
        has_object = True if True in inner else (None if None in inner else False)
    elif fields is not None and not isinstance(fields, dict):
        has_object = None
    digits = code.lstrip("<>|=")[1:]
    size = elsize if elsize > 0 else (int(digits) if digits.isdigit() else None)
    return has_object, size


def _nested_pickle(m: Machine) -> None:
    """An object array: a pickle of its own right here (Python's unpickler, no BUILD step)."""
    inner = Machine(m.src, m.meter)
    result = inner.run()
    outer = m.result
    outer.globals += result.globals
    outer.calls += result.calls
    outer.anomalies += result.anomalies
    outer.persistent_ids += result.persistent_ids
    if result.stop is not None:
        if result.stop.kind == "budget":
            raise BudgetExceeded(result.stop.message.removeprefix("too large to vet: "), 0)
        raise PickleStop(f"the object array's own pickle: {result.stop.message}")


def _cannot_locate(m: Machine, why: str) -> None:
    message = (
        f"joblib reads an array's data from the stream after this BUILD, but {why}: where "
        "the pickle goes on cannot be found, so what follows cannot be vetted"
    )
    m.anomaly(message)
    raise PickleStop(message)
