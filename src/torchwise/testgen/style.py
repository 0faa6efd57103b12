"""The project's test style, read from its configuration and its existing tests.

A generated test file should look like the tests next to it. This module finds
the project root and reads what decides that: where tests live (pytest's
``testpaths``, else an existing ``tests/`` or ``test/``), which directories pytest
already puts on ``sys.path`` (``pythonpath``), the line length the formatter
enforces (ruff, black), and, from the existing test files, whether they use
``from __future__ import annotations``, annotate test functions and group tests
in ``class Test...``. A project without tests gets modern defaults.
"""

from __future__ import annotations

import ast
import configparser
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: Files or directories that mark a project root, nearest first.
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini", ".git")
#: black's and ruff's default line length.
DEFAULT_LINE_LENGTH = 88
#: Enough existing test files to read the style from, few enough to stay fast.
MAX_SCANNED = 100


@dataclass(frozen=True)
class ProjectStyle:
    """How the project's tests are written, and where they live."""

    root: Path
    tests_dir: Path
    line_length: int = DEFAULT_LINE_LENGTH
    future_annotations: bool = True
    typed: bool = True
    test_classes: bool = False
    #: directories pytest puts on sys.path (``pythonpath``), absolute
    import_roots: tuple[Path, ...] = ()
    #: how many existing test files the style was read from
    scanned: int = 0

    def describe(self) -> str:
        """One line for the user: what was detected and from where."""
        source = f"{self.scanned} test files" if self.scanned else "no existing tests (defaults)"
        parts = [
            "test classes" if self.test_classes else "test functions",
            "type hints" if self.typed else "no type hints",
            f"line length {self.line_length}",
        ]
        return f"style from {source}: {', '.join(parts)}"


def find_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding a project marker, else ``start``."""
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        if any((candidate / marker).exists() for marker in ROOT_MARKERS):
            return candidate
    return directory


def detect_style(root: Path, *, exclude: Path | None = None) -> ProjectStyle:
    """Read the style of the project at ``root``; ``exclude`` is the file being generated
    (regenerating must not learn its style from its own previous output)."""
    pyproject = _toml(root / "pyproject.toml")
    tool = pyproject.get("tool", {})
    pytest_ini = _pytest_ini(root) or tool.get("pytest", {}).get("ini_options", {})
    tests_dir = _tests_dir(root, _as_list(pytest_ini.get("testpaths")))
    import_roots = tuple(
        (root / entry).resolve() for entry in _as_list(pytest_ini.get("pythonpath"))
    )
    line_length = _line_length(tool)
    files = [f for f in _test_files(tests_dir) if exclude is None or f.resolve() != exclude]
    future, typed, in_class, functions = 0, 0, 0, 0
    for path in files:
        tree = _parse(path)
        if tree is None:
            continue
        future += any(
            isinstance(node, ast.ImportFrom)
            and node.module == "__future__"
            and any(alias.name == "annotations" for alias in node.names)
            for node in tree.body
        )
        for function, nested in _test_functions(tree):
            functions += 1
            typed += function.returns is not None
            in_class += nested
    if not functions:
        return ProjectStyle(
            root, tests_dir, line_length, import_roots=import_roots, scanned=len(files)
        )
    return ProjectStyle(
        root,
        tests_dir,
        line_length,
        future_annotations=2 * future >= len(files),
        typed=2 * typed >= functions,
        test_classes=2 * in_class > functions,
        import_roots=import_roots,
        scanned=len(files),
    )


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _pytest_ini(root: Path) -> dict[str, Any]:
    """``[pytest]`` of pytest.ini or tox.ini, or ``[tool:pytest]`` of setup.cfg."""
    for name, section in (
        ("pytest.ini", "pytest"),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        parser = configparser.ConfigParser()
        try:
            parser.read(root / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_section(section):
            return dict(parser[section])
    return {}


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    return [str(v) for v in value]


def _tests_dir(root: Path, testpaths: list[str]) -> Path:
    for entry in testpaths:
        candidate = root / entry
        if candidate.suffix != ".py":
            return candidate
    for name in ("tests", "test"):
        if (root / name).is_dir():
            return root / name
    return root / "tests"


def _line_length(tool: dict[str, Any]) -> int:
    for section in ("ruff", "black"):
        value = tool.get(section, {}).get("line-length", tool.get(section, {}).get("line_length"))
        if isinstance(value, int) and value >= 40:
            return value
    return DEFAULT_LINE_LENGTH


def _test_files(tests_dir: Path) -> list[Path]:
    if not tests_dir.is_dir():
        return []
    found: set[Path] = set()
    for pattern in ("test_*.py", "*_test.py"):
        found.update(p for p in tests_dir.rglob(pattern) if p.is_file())
    return sorted(found)[:MAX_SCANNED]


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _test_functions(tree: ast.Module) -> Iterable[tuple[ast.FunctionDef, bool]]:
    """Module-level ``test_*`` functions and ``test_*`` methods of ``Test*`` classes."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            yield node, False
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                    yield item, True
