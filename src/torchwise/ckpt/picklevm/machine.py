"""A symbolic pickle machine: CPython's C unpickler, opcode for opcode, minus the imports.

The machine keeps the unpickler's stack, mark stack and memo exactly as
``_pickle.c`` does and dispatches through one opcode table
(:func:`~torchwise.ckpt.picklevm.registry.opcode_table`, byte -> handler, like
``pickle.Unpickler.dispatch``). Plain data is rebuilt as
real values; ``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``OBJ``, ``REDUCE``,
``NEWOBJ``, ``BUILD``, persistent ids and extension codes become inert records
(:mod:`torchwise.ckpt.picklevm.values`). Nothing here imports a module the pickle names
or calls anything from it.

Where the C unpickler raises, the machine raises :class:`PickleStop` with the
offset (a stack underflow is a parse error, never an ``IndexError``). Where
only torch.load's settings make it raise (a ``STRING`` that is not UTF-8, a
``FRAME`` longer than the data, an out-of-band buffer) the machine records the
first such point in ``torch_stop`` and goes on, so a payload behind it is still
judged. Where it cannot know what the unpickler would do (a computed import, a
call of a call's result, BUILD on a class) it records an
:class:`~torchwise.ckpt.picklevm.values.Anomaly`: unsafe, because fail-closed.
"""

from __future__ import annotations

import _compat_pickle
import struct
from collections.abc import Callable
from typing import Any

from torchwise.ckpt.budgets import DEFAULT_BUDGETS, BudgetExceeded, Meter
from torchwise.ckpt.picklevm import ctext
from torchwise.ckpt.picklevm.registry import PickleStop, opcode_table
from torchwise.ckpt.picklevm.source import (
    LARGE,
    ByteStream,
    SkippedBytes,
    SkippedText,
    Source,
    Truncated,
)
from torchwise.ckpt.picklevm.values import (
    Anomaly,
    Call,
    Global,
    PDict,
    PickleResult,
    Stop,
    is_plain,
)

__all__ = ["BuildHook", "Machine", "PickleStop", "run_pickle"]

#: called after BUILD with the machine and the object built (a loader's unpickler subclass)
BuildHook = Callable[["Machine", Any], None]

#: types whose zero-argument call is an empty mapping that SETITEMS then fills
_DICT_TYPES = frozenset({"collections.OrderedDict", "builtins.dict", "collections.Counter"})
_UNSIGNED = {1: struct.Struct("<B"), 2: struct.Struct("<H"), 4: struct.Struct("<I"),
             8: struct.Struct("<Q")}  # fmt: skip
_INT4 = struct.Struct("<i")
#: entries kept in each per-pickle cache of names
_CACHE = 4096


class Machine:
    def __init__(
        self,
        source: Source,
        meter: Meter,
        *,
        encoding: str = "utf-8",
        module_mapping: dict[str, str] | None = None,
        on_build: BuildHook | None = None,
    ) -> None:
        self.src = source
        #: a loader's own BUILD step (joblib reads array data that follows it)
        self.on_build = on_build
        self.meter = meter
        self.budgets = meter.budgets
        self.encoding = encoding
        self.module_mapping = module_mapping or {}
        self.stack: list[Any] = []
        self.metastack: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.proto = 0
        self.at = source.offset
        self.frame_end = -1
        self.result = PickleResult(None, 0, [], [], [], [], source.offset, source.offset, 0)
        #: name lines and fixed names seen before (a bomb repeats one global a million times)
        self._names: dict[bytes, str] = {}
        self._fixed: dict[tuple[str, str, bool], tuple[str, str]] = {}

    # --- the loop -----------------------------------------------------------------
    def run(self) -> PickleResult:
        src, table, result = self.src, opcode_table().handlers, self.result
        allowed = self.budgets.max_opcodes - self.meter.opcodes
        n = 0
        try:
            while True:
                pos = src.pos
                self.at = src.base + pos
                if pos < len(src.buf):
                    code = src.buf[pos]
                    src.pos = pos + 1
                else:
                    code = src.take(1)[0]
                handler = table.get(code)
                if handler is None:
                    raise PickleStop(f"invalid load key {bytes([code])!r}")
                n += 1
                if n > allowed:
                    raise BudgetExceeded("the number of opcodes", self.budgets.max_opcodes)
                if not n & 0xFFFF:
                    self.meter.check_time(self.at)
                if handler(self):
                    result.end = src.offset
                    result.frame_past_stop = self.frame_end > src.offset
                    break
                if self.frame_end >= 0 and src.base + src.pos >= self.frame_end:
                    self.leave_frame()
        except Truncated as exc:
            result.stop = Stop(str(exc), self.at, "truncated")
        except PickleStop as exc:
            result.stop = Stop(str(exc), self.at, exc.kind)
        except BudgetExceeded as exc:
            result.stop = Stop(f"too large to vet: {exc}", self.at, "budget")
        result.n_ops = n
        self.meter.opcodes += n
        if result.stop is not None:
            result.end = self.at
        return result

    def leave_frame(self) -> None:
        """The current frame is used up; an opcode that ran past its end is an anomaly.

        The C unpickler reads a frame into its buffer; an argument that runs past
        the buffer is read afresh from the file and the frame's remaining bytes
        are skipped (pickle.loads on the same bytes does not skip them), so the
        opcodes it decodes after this point depend on how it was given the data.
        """
        if self.at < self.frame_end < self.src.offset:
            self.anomaly(
                f"an opcode runs past the end of its FRAME (at byte {self.frame_end}): the C "
                "unpickler reading a file skips bytes here that pickle.loads does not"
            )
        self.frame_end = -1

    # --- helpers ------------------------------------------------------------------
    def pop(self) -> Any:
        if not self.stack:
            raise PickleStop("unpickling stack underflow")
        return self.stack.pop()

    def top(self) -> Any:
        if not self.stack:
            raise PickleStop("unpickling stack underflow")
        return self.stack[-1]

    def pop_mark(self) -> list[Any]:
        if not self.metastack:
            raise PickleStop("could not find MARK")
        items = self.stack
        self.stack = self.metastack.pop()
        return items

    def push(self, value: Any) -> None:
        self.stack.append(value)

    def anomaly(self, message: str) -> None:
        self.result.anomalies.append(Anomaly(message, self.at))

    def soft_stop(self, message: str) -> None:
        """torch.load raises here, other loaders may not: record it and go on."""
        if self.result.torch_stop is None:
            self.result.torch_stop = Stop(message, self.at, "malformed")

    def unsigned(self, nbytes: int) -> int:
        if nbytes == 1:
            return self.src.u8()
        if nbytes == 4:
            return self.src.u32()
        value: int = _UNSIGNED[nbytes].unpack(self.src.take(nbytes))[0]
        return value

    def decode_str(self, raw: bytes) -> str:
        """STRING / BINSTRING text: torch.load passes encoding='utf-8' (strict)."""
        try:
            return raw.decode(self.encoding, "strict")
        except UnicodeDecodeError:
            self.soft_stop(f"a string that is not {self.encoding} (torch.load raises here)")
            return raw.decode("latin-1")

    def make_global(self, module: str, name: str, opcode_name: str) -> Global:
        key = (module, name, self.proto < 3)
        fixed = self._fixed.get(key)
        if fixed is None:
            fixed = self._fix(module, name)
            if len(self._fixed) < _CACHE:
                self._fixed[key] = fixed
        glob = Global(module, name, self.at, opcode_name, fixed[0], fixed[1])
        self.result.globals.append(glob)
        return glob

    def _fix(self, module: str, name: str) -> tuple[str, str]:
        """The name find_class imports: torch's module mapping, then Python 2's names."""
        fixed_module = self.module_mapping.get(module, module)
        fixed_name = name
        if self.proto < 3:  # Unpickler(fix_imports=True) for Python 2 pickles
            if (fixed_module, name) in _compat_pickle.NAME_MAPPING:
                fixed_module, fixed_name = _compat_pickle.NAME_MAPPING[(fixed_module, name)]
            else:
                fixed_module = _compat_pickle.IMPORT_MAPPING.get(fixed_module, fixed_module)
        return fixed_module, fixed_name

    def name_line(self) -> str:
        """A GLOBAL module or attribute line: UTF-8 without its newline (a ``\\r`` stays)."""
        line = self.src.line()
        cached = self._names.get(line)
        if cached is None:
            if len(line) < 2:
                raise PickleStop("pickle data was truncated (a GLOBAL/INST name)")
            try:
                cached = line[:-1].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise PickleStop(str(exc)) from None
            if len(self._names) < _CACHE:
                self._names[line] = cached
        return cached

    def call(self, func: Any, args: Any, opcode_name: str, kwargs: Any = None) -> Any:
        if not isinstance(func, Global):
            if is_plain(func):
                raise PickleStop(f"{opcode_name}: {type(func).__name__} object is not callable")
            self.anomaly(f"{opcode_name} calls a computed value, not a named global")
        if is_plain(args) and not isinstance(args, tuple):
            raise PickleStop(f"{opcode_name}: the argument list must be a tuple")
        record = Call(func, args, self.at, opcode_name, kwargs)
        self.result.calls.append(record)
        if isinstance(func, Global) and func.qualname in _DICT_TYPES:
            # OrderedDict() then SETITEMS, or Python 2's OrderedDict([[k, v], ...]): keep a
            # real mapping so keys resolve; the call stays recorded for the scan.
            pairs = _pairs(args)
            if pairs is not None:
                mapping = PDict()
                mapping.type_name = func.qualname
                for key, value in pairs:
                    try:
                        mapping[key] = value
                    except TypeError:
                        return record
                return mapping
        return record

    def memo_put(self, key: int, value: Any) -> None:
        memo = self.memo
        memo[key] = value
        if len(memo) > self.budgets.max_memo:
            raise BudgetExceeded("the memo size", self.budgets.max_memo)

    def line_arg(self, parse: Callable[[bytes], Any]) -> Any:
        """A protocol 0 argument: one line, parsed as the C unpickler parses it."""
        try:
            return parse(self.src.line())
        except ctext.TextError as exc:
            raise PickleStop(str(exc)) from None

    def text(self, size: int) -> Any:
        """A BINUNICODE argument of ``size`` bytes: UTF-8 with surrogates, as C decodes it."""
        if size > LARGE:
            return self._large(size, "text")
        raw = self.src.take(size)
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise PickleStop(f"a BINUNICODE string that is not UTF-8 ({exc.reason})") from None

    def memo_get(self, key: int) -> Any:
        if key not in self.memo:
            raise PickleStop(f"Memo value not found at index {key}")
        return self.memo[key]

    def counted(self, nbytes: int, kind: str) -> Any:
        """A length-prefixed byte, text or string argument."""
        if nbytes == 4 and kind == "long":
            size = _INT4.unpack(self.src.take(4))[0]
        else:
            size = self.unsigned(nbytes)
        if kind == "long":
            if size < 0:
                raise PickleStop("LONG pickle has negative byte count")
            return int.from_bytes(self.src.take(size), "little", signed=True) if size else 0
        if size > LARGE:
            return self._large(size, kind)
        raw = self.src.take(size)
        if kind == "text":
            try:
                return raw.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError as exc:
                raise PickleStop(f"a BINUNICODE string that is not UTF-8 ({exc.reason})") from None
        if kind == "string":
            return self.decode_str(raw)
        return bytearray(raw) if kind == "bytearray" else raw

    def _large(self, size: int, kind: str) -> Any:
        remaining = self.src.remaining()
        if remaining is not None and size > remaining:
            raise Truncated("pickle data was truncated")
        if kind == "text":
            try:
                return self.src.skip_text(size)
            except UnicodeDecodeError as exc:
                raise PickleStop(f"a BINUNICODE string that is not UTF-8 ({exc.reason})") from None
        if kind == "string":
            # Long Python 2 strings: judge as text we did not keep (never an import name).
            self.src.skip(size)
            return SkippedText(size, "")
        self.src.skip(size)
        return SkippedBytes(size)


def _pairs(args: Any) -> list[tuple[Any, Any]] | None:
    """The items of ``OrderedDict(*args)`` when they are literal: () or ([[k, v], ...],)."""
    if args == ():
        return []
    if isinstance(args, tuple) and len(args) == 1 and isinstance(args[0], list):
        items = args[0]
        if all(isinstance(i, (list, tuple)) and len(i) == 2 for i in items):
            return [(i[0], i[1]) for i in items]
    return None


def run_pickle(
    stream: ByteStream,
    start: int | None = None,
    *,
    meter: Meter | None = None,
    size: int | None = None,
    seekable: bool = True,
    rewind: bool = False,
    encoding: str = "utf-8",
    module_mapping: dict[str, str] | None = None,
    on_build: BuildHook | None = None,
) -> PickleResult:
    """Rebuild one pickle from ``stream`` (at offset ``start``, default its tell()).

    Never raises for a bad pickle: :attr:`PickleResult.stop` says where and why it
    ended without STOP. ``rewind`` leaves the stream just after STOP (stacked pickles).
    """
    begin = stream.tell() if start is None else start
    if seekable and start is not None:
        stream.seek(begin)
    meter = meter or Meter(DEFAULT_BUDGETS)
    source = Source(stream, begin, meter.budgets.max_bytes, size, seekable)
    machine = Machine(
        source, meter, encoding=encoding, module_mapping=module_mapping, on_build=on_build
    )
    result = machine.run()
    if rewind and result.complete:
        source.rewind()
    return result
