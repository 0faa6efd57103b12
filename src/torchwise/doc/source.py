"""Rewriting docstrings in a source file, byte for byte everywhere else.

Edits are exact byte ranges taken from the AST (``lineno``/``col_offset`` ..
``end_lineno``/``end_col_offset``; columns are UTF-8 byte offsets), so
comments, formatting and line endings outside the docstring literals never
change. A missing docstring is inserted as the first statement of the body,
indented like it. The result must re-parse and must carry exactly the intended
docstrings, or nothing is written.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from torchwise.errors import TorchwiseError

Def = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class DocTarget:
    """Where a docstring lives: a class (``method`` None) or one of its methods."""

    qualname: str
    method: str | None = None

    def label(self) -> str:
        return self.qualname if self.method is None else f"{self.qualname}.{self.method}"


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: bytes


def parse_source(source: bytes, path: Path) -> ast.Module:
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TorchwiseError(
            f"{path}:{exc.lineno}: cannot parse: {exc.msg}",
            hint="fix the syntax error first; torchwise never writes a file it cannot parse",
        ) from None


def find_def(tree: ast.Module, target: DocTarget) -> Def | None:
    """The class (nested classes by dotted qualname) or method a target names."""
    body: list[ast.stmt] = tree.body
    node: Def | None = None
    for part in target.qualname.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    if target.method is None:
        return node
    return next(
        (
            n
            for n in body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == target.method
        ),
        None,
    )


def current_docstring(tree: ast.Module, target: DocTarget) -> str | None:
    node = find_def(tree, target)
    return None if node is None else ast.get_docstring(node, clean=True)


def literal(text: str, indent: str, newline: str) -> str:
    """``text`` as a triple-quoted literal whose continuation lines carry ``indent``."""
    body = text
    prefix = ""
    if "\\" in body and '"""' not in body and not body.endswith(("\\", '"')):
        prefix = "r"  # keep LaTeX and regexes readable instead of doubling backslashes
    else:
        body = body.replace("\\", "\\\\")
        # escape only the quotes that would end the literal: runs of three, or at the end
        body = re.sub(r'"{3,}|"+$', lambda m: '\\"' * len(m.group()), body)
    lines = body.split("\n")
    if len(lines) == 1:
        return f'{prefix}"""{lines[0]}"""'
    rest = [indent + line if line else "" for line in lines[1:]]
    return newline.join([f'{prefix}"""{lines[0]}', *rest, f'{indent}"""'])


def _line_offsets(source: bytes) -> list[int]:
    offsets = [0]
    for line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def _newline(source: bytes) -> str:
    for candidate in (b"\r\n", b"\n", b"\r"):
        if candidate in source:
            return candidate.decode()
    return "\n"


def _edit_for(source: bytes, tree: ast.Module, target: DocTarget, text: str) -> _Edit:
    node = find_def(tree, target)
    if node is None:
        raise TorchwiseError(f"cannot find {target.label()} in the source")
    offsets = _line_offsets(source)
    newline = _newline(source)
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        value = first.value
        assert value.end_lineno is not None and value.end_col_offset is not None
        line_start = offsets[value.lineno - 1]
        indent = source[line_start : line_start + value.col_offset].decode()
        if indent.strip():  # e.g. ``class A: """doc"""`` on one line
            indent = " " * (node.col_offset + 4)
        start = line_start + value.col_offset
        end = offsets[value.end_lineno - 1] + value.end_col_offset
        return _Edit(start, end, literal(text, indent, newline).encode())
    decorators = getattr(first, "decorator_list", [])
    lineno = min([first.lineno, *(d.lineno for d in decorators)])
    if lineno == node.lineno:
        raise TorchwiseError(
            f"{target.label()} has its body on the header line; put it on its own line first"
        )
    line_start = offsets[lineno - 1]
    indent = source[line_start : line_start + first.col_offset].decode()
    if indent.strip():
        raise TorchwiseError(f"cannot place a docstring in {target.label()}: unusual layout")
    insert = indent + literal(text, indent, newline) + newline
    return _Edit(line_start, line_start, insert.encode())


def rewrite(source: bytes, path: Path, docstrings: dict[DocTarget, str]) -> bytes:
    """``source`` with the given docstrings in place; everything else unchanged.

    Targets whose docstring already reads ``text`` are not touched. Raises
    :class:`TorchwiseError` when the source does not parse or the result does
    not re-parse with exactly the requested docstrings.
    """
    tree = parse_source(source, path)
    edits = [
        _edit_for(source, tree, target, text)
        for target, text in docstrings.items()
        if current_docstring(tree, target) != text
    ]
    result = apply_edits(source, edits)
    verify(result, path, docstrings)
    return result


def apply_edits(source: bytes, edits: list[_Edit]) -> bytes:
    out = source
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        out = out[: edit.start] + edit.text + out[edit.end :]
    return out


def verify(result: bytes, path: Path, docstrings: dict[DocTarget, str]) -> None:
    """Refuse a result that does not parse or does not carry the intended docstrings."""
    try:
        tree = ast.parse(result, filename=str(path))
    except SyntaxError as exc:
        raise TorchwiseError(
            f"refusing to write {path}: the rewritten file would not parse "
            f"(line {exc.lineno}: {exc.msg})",
            hint="this is a bug in torchwise; the file was left unchanged",
        ) from None
    for target, text in docstrings.items():
        if current_docstring(tree, target) != text:
            raise TorchwiseError(
                f"refusing to write {path}: the docstring of {target.label()} would not "
                "read back as generated",
                hint="this is a bug in torchwise; the file was left unchanged",
            )


def unified_diff(before: bytes, after: bytes, path: Path) -> str:
    old = before.decode("utf-8").splitlines(keepends=True)
    new = after.decode("utf-8").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n" for line in lines)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` in one step, keeping its permissions."""
    mode = path.stat().st_mode
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
