"""The text arguments of protocol 0-1 opcodes, parsed exactly as CPython's ``_pickle.c`` does.

``pickletools`` is a documentation tool: it rejects much of what the C
unpickler accepts, so a scanner built on it stops where ``torch.load`` goes on.
Each function here takes one line (up to and including its ``\\n``, as
``_Unpickler_Readline`` returns it) and returns the value the C unpickler
pushes, or raises :class:`TextError` where the C unpickler raises. The C code
is quoted in the comments; the differential tests run the real ``pickle``
module on the same lines.

- ``INT``: ``strtol(s, &end, 0)`` first, so ``0x1f``, octal ``017``, leading
  whitespace and a ``+`` are accepted, and parsing stops at a NUL byte; on
  overflow or trailing text, ``PyLong_FromString(s, NULL, 0)`` (``0b``/``0o``
  prefixes, ``_`` separators). ``I00``/``I01`` (three bytes with the newline)
  are ``False``/``True``, and so are ``I+1``/`` 1`` and friends.
- ``LONG``: a trailing ``L`` is dropped, then ``PyLong_FromString(s, NULL, 0)``.
- ``FLOAT``: ``PyOS_string_to_double``: no whitespace, no ``_``, ``inf``/``nan``
  in any case; the parse must end at the newline or a NUL.
- ``STRING``: quoted, backslash escapes as ``PyBytes_DecodeEscape``, then decoded
  with the unpickler's ``encoding`` (torch.load passes ``utf-8``).
- ``UNICODE``: ``raw_unicode_escape``.
- ``GLOBAL``/``INST`` names: UTF-8 (ASCII for ``INST``) of the line without its
  ``\\n``; a ``\\r`` stays part of the name.
- ``GET``/``PUT``: ``PyLong_FromString(s, NULL, 10)``.
"""

from __future__ import annotations

import codecs
import re
import warnings

_SPACE = b" \t\n\v\f\r"
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
# PyOS_string_to_double: sign, then digits with an optional point and exponent, or inf/nan.
_FLOAT = re.compile(rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:infinity|inf|nan))")


class TextError(ValueError):
    """The C unpickler raises on this argument."""


def _c_string(line: bytes) -> bytes:
    """The line as a C string: up to its first NUL (the copy is NUL-terminated)."""
    nul = line.find(b"\0")
    return line if nul < 0 else line[:nul]


def _py_long(text: bytes, base: int) -> int:
    """``PyLong_FromString(text, NULL, base)``: whitespace around, ``_`` between digits."""
    try:
        return int(_c_string(text), base)
    except ValueError:
        raise TextError(f"invalid literal for int() with base {base}: {text!r}") from None


def _strtol(text: bytes) -> tuple[int, int, bool]:
    """glibc ``strtol(text, &end, 0)`` on a C string: (value, end index, overflowed)."""
    i, n = 0, len(text)
    while i < n and text[i] in _SPACE:
        i += 1
    negative = False
    if i < n and text[i] in b"+-":
        negative = text[i] == 0x2D
        i += 1
    base, digits = 10, b"0123456789"
    if i < n and text[i] == 0x30:  # '0': octal, or hex after 0x with a hex digit
        if i + 2 < n and text[i + 1] in b"xX" and text[i + 2] in b"0123456789abcdefABCDEF":
            base, digits, i = 16, b"0123456789abcdefABCDEF", i + 2
        else:
            base, digits = 8, b"01234567"
    start = i
    while i < n and text[i] in digits:
        i += 1
    if i == start:
        return 0, 0, False  # no digits: end points at the start of the string
    value = int(text[start:i], base)
    value = -value if negative else value
    if not _LONG_MIN <= value <= _LONG_MAX:
        return (_LONG_MIN if negative else _LONG_MAX), i, True
    return value, i, False


def parse_int(line: bytes) -> int | bool:
    """``INT``: see the module docstring. ``line`` ends with ``\\n``."""
    if len(line) < 2:
        raise TextError("pickle data was truncated (INT)")
    text = _c_string(line)
    value, end, overflow = _strtol(text)
    if overflow or (end < len(text) and text[end] != 0x0A):
        return _py_long(line, 0)
    if len(line) == 3 and value in (0, 1):
        return bool(value)
    return value


def parse_long(line: bytes) -> int:
    """``LONG``: a trailing ``L`` (before the newline) is dropped."""
    if len(line) < 2:
        raise TextError("pickle data was truncated (LONG)")
    if line[-2:-1] == b"L":
        line = line[:-2] + b"\0"
    return _py_long(line, 0)


def parse_float(line: bytes) -> float:
    """``FLOAT``: ``PyOS_string_to_double`` then the end must be the newline or a NUL."""
    if len(line) < 2:
        raise TextError("pickle data was truncated (FLOAT)")
    match = _FLOAT.match(line)
    if match is None:
        raise TextError(f"could not convert string to float: {line!r}")
    end = match.end()
    if line[end : end + 1] not in (b"\n", b"\0"):
        raise TextError(f"could not convert string to float: {line!r}")
    text = match.group()
    value = float(text)
    if value in (float("inf"), float("-inf")) and b"inf" not in text.lower():
        raise TextError(f"float overflow: {text!r}")
    return value


def parse_string(line: bytes) -> bytes:
    """``STRING``: the raw bytes between the quotes, escapes decoded (not yet text)."""
    body = line[:-1]
    if len(body) < 2 or body[0] != body[-1] or body[:1] not in (b"'", b'"'):
        raise TextError("the STRING opcode argument must be quoted")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "invalid escape sequence" is a warning in C too
            decoded: bytes = codecs.escape_decode(body[1:-1])[0]
    except ValueError as exc:
        raise TextError(str(exc)) from None
    return decoded


def parse_unicode(line: bytes) -> str:
    """``UNICODE``: ``raw_unicode_escape`` of the line without its newline."""
    try:
        return line[:-1].decode("raw_unicode_escape")
    except UnicodeDecodeError as exc:
        raise TextError(str(exc)) from None


def parse_name(line: bytes, encoding: str) -> str:
    """A ``GLOBAL`` (UTF-8) or ``INST`` (ASCII) module or attribute line."""
    if len(line) < 2:
        raise TextError("pickle data was truncated (a GLOBAL/INST name)")
    try:
        return line[:-1].decode(encoding, "strict")
    except UnicodeDecodeError as exc:
        raise TextError(str(exc)) from None


def parse_memo_key(line: bytes) -> int:
    """``GET``/``PUT``: a base-10 integer."""
    if len(line) < 2:
        raise TextError("pickle data was truncated (GET/PUT)")
    return _py_long(line, 10)


def parse_persid(line: bytes) -> str:
    """``PERSID``: an ASCII string."""
    try:
        return line[:-1].decode("ascii", "strict")
    except UnicodeDecodeError:
        raise TextError("persistent IDs in protocol 0 must be ASCII strings") from None
