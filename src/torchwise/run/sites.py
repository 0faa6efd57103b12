"""Places in the user's code: the line a finding points at.

A check fires inside torch (an optimizer hook, a module hook, a tensor op), so
the place to report is the innermost frame on the stack that is the user's own
code: not the standard library, not an installed package, not torch and not
torchwise. :func:`user_site` finds it; whether a file is the user's is decided
once per file name and cached. On Python 3.11+ the column range of the running
expression comes from the code object's positions table, so a finding on
``loss.backward()`` underlines that call.

:func:`assignment_line` answers a question a frame cannot: on which line of a
function a variable was last assigned or accumulated (``total += loss``).
"""

from __future__ import annotations

import ast
import functools
import itertools
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType

_TORCHWISE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(frozen=True)
class Site:
    """A range of the user's code; lines and columns are 1-based."""

    path: str  # absolute
    line: int
    column: int = 1
    end_line: int = 0
    end_column: int = 0
    function: str = ""

    @property
    def label(self) -> str:
        """``train.py:42`` (relative to the working directory when under it)."""
        return f"{display(self.path)}:{self.line}"

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "function": self.function,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Site:
        return cls(
            path=str(data["path"]),
            line=int(str(data["line"])),
            column=int(str(data.get("column", 1))),
            end_line=int(str(data.get("end_line", 0))),
            end_column=int(str(data.get("end_column", 0))),
            function=str(data.get("function", "")),
        )


def display(path: str) -> str:
    """``path`` relative to the working directory when it is under it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        roots.add(os.path.dirname(os.path.abspath(str(torch.__file__))))
    return tuple(os.path.normcase(root).rstrip(os.sep) + os.sep for root in roots if root)


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """Whether ``filename`` (a code object's ``co_filename``) is the user's own code."""
    if not filename or filename.startswith("<"):
        return False
    path = os.path.normcase(os.path.abspath(filename))
    if path.startswith(os.path.normcase(_TORCHWISE)):
        return False
    parts = Path(path).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    # a script in the working directory is the user's even when the working
    # directory lies under a library root (a virtual environment in the project)
    return not path.startswith(_library_roots())


def _columns(frame: FrameType) -> tuple[int, int, int, int]:
    """(line, column, end_line, end_column) of the frame's running instruction."""
    line = frame.f_lineno or 1
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None or frame.f_lasti < 0:  # Python 3.10
        return line, 1, line, 0
    found = next(itertools.islice(positions(), frame.f_lasti // 2, None), None)
    if found is None or found[0] is None or found[2] is None:
        return line, 1, line, 0
    start, end, column, end_column = found
    if start != line:  # a multi-line statement: keep the frame's own line
        return line, 1, line, 0
    return start, column + 1, end or start, (end_column or column) + 1


def frame_site(frame: FrameType) -> Site:
    line, column, end_line, end_column = _columns(frame)
    return Site(
        path=os.path.abspath(frame.f_code.co_filename),
        line=line,
        column=column,
        end_line=end_line,
        end_column=end_column,
        function=frame.f_code.co_name,
    )


def user_frame(start: FrameType | None = None) -> FrameType | None:
    """The innermost frame of user code at or above ``start`` (default: the caller)."""
    frame: FrameType | None = start if start is not None else sys._getframe(1)
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def user_site(start: FrameType | None = None) -> Site | None:
    """The innermost place in user code on the current stack, or None."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    return frame_site(frame) if frame is not None else None


def user_frames(start: FrameType | None = None, limit: int = 8) -> list[FrameType]:
    """Up to ``limit`` user frames from the innermost outwards."""
    found: list[FrameType] = []
    frame: FrameType | None = start if start is not None else sys._getframe(1)
    while frame is not None and len(found) < limit:
        if is_user_file(frame.f_code.co_filename):
            found.append(frame)
        frame = frame.f_back
    return found


@functools.lru_cache(maxsize=256)
def _function_tree(path: str, first_line: int) -> ast.AST | None:
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    if first_line <= 1:
        return tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if start == first_line:
                return node
    return tree


def assignment_line(code: CodeType, name: str, before: int) -> int | None:
    """The last line before ``before`` in ``code``'s function that grows ``name``, else
    the last that binds it.

    Grows: ``name += ...``, ``name.append(...)``/``extend``/``add``/``insert``, ``name =
    name + ...``; binds: any ``name = ...``. A running total is kept where it grows, not
    where it is read once at the end (``total = torch.stack(total).mean()``). ``self.name``
    counts for an attribute. None when the source is not readable.
    """
    tree = _function_tree(os.path.abspath(code.co_filename), code.co_firstlineno)
    if tree is None:
        return None
    attribute = name.split(".")[-1]
    grows: int | None = None
    binds: int | None = None
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if line is None or line >= before or not _binds(node, name, attribute):
            continue
        if _grows(node, {name, attribute}):
            grows = max(grows or 0, line)
        binds = max(binds or 0, line)
    return grows or binds


def _grows(node: ast.AST, wanted: set[str]) -> bool:
    if isinstance(node, (ast.AugAssign, ast.Call)):
        return True  # `+=`, or one of the growing methods _binds accepted
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp):
        operands = (node.value.left, node.value.right)
        return any(_target_name(operand) in wanted for operand in operands)
    return False


def _target_name(target: ast.AST) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Subscript):
        return _target_name(target.value)
    return None


def _binds(node: ast.AST, name: str, attribute: str) -> bool:
    wanted = {name, attribute}
    if isinstance(node, ast.Assign):
        return any(_target_name(t) in wanted for t in node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return _target_name(node.target) in wanted
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"append", "extend", "add", "insert"}
    ):
        return _target_name(node.func.value) in wanted
    return False
