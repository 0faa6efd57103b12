"""What a project declares it needs: pyproject, requirements*, setup.py/cfg, environment.yml.

The one reader of packaging files: review's torch-version range
(:mod:`torchwise.review.index.declared`) and project knowledge's dependency list
both read them here. Each reader returns :class:`Requirement` records
(normalised name, the spec as written, the file and line); none of them runs
the project's code: ``setup.py`` is parsed, not executed, and only literal
lists are read (given to ``install_requires``/``extras_require`` directly or
through a module-level name).
"""

from __future__ import annotations

import ast
import configparser
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: a packaging file larger than this is not one (a generated lock file): left unread
MAX_BYTES = 1_500_000

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


@dataclass(frozen=True)
class Requirement:
    name: str  # normalised: lower case, "-" for "_" and "."
    spec: str  # ">=2.1,<3" or "" when unpinned
    source: str  # relative path
    line: int | None = None


def read_text(path: Path, limit: int = MAX_BYTES) -> str | None:
    """The file's text, or None when it is larger than ``limit`` bytes or unreadable."""
    try:
        if path.stat().st_size > limit:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_line(text: str, source: str, line: int | None = None) -> Requirement | None:
    """``torch>=2.1 ; python_version > "3.8"`` -> Requirement("torch", ">=2.1")."""
    text = text.split("#", 1)[0].strip()
    if not text or text.startswith(("-", "git+", "http:", "https:", "file:", ".")):
        return None
    match = _REQUIREMENT.match(text)
    if match is None:
        return None
    spec = match.group(3).split(";", 1)[0].strip()
    if spec.startswith("@"):
        spec = ""  # a direct URL reference pins nothing readable
    return Requirement(normalise(match.group(1)), spec.replace(" ", ""), source, line)


def _line_of(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return None


def from_pyproject(path: Path, relative: str) -> tuple[list[Requirement], str | None]:
    """PEP 621 dependencies, optional-dependencies, dependency-groups and Poetry's table."""
    text = read_text(path)
    if text is None:
        return [], None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return [], None
    project: dict[str, Any] = document.get("project", {}) or {}
    specs: list[str] = list(project.get("dependencies", []) or [])
    for group in (project.get("optional-dependencies", {}) or {}).values():
        specs.extend(group or [])
    for group in (document.get("dependency-groups", {}) or {}).values():
        specs.extend(item for item in group or [] if isinstance(item, str))
    found = [
        req
        for spec in specs
        if isinstance(spec, str)
        and (req := parse_line(spec, relative, _line_of(text, spec))) is not None
    ]
    poetry = document.get("tool", {}).get("poetry", {}) or {}
    for table in (poetry.get("dependencies", {}), *_poetry_groups(poetry)):
        for name, value in (table or {}).items():
            if normalise(name) == "python":
                continue
            version = value if isinstance(value, str) else (value or {}).get("version", "")
            spec = "" if version in ("*", "") else str(version)
            found.append(Requirement(normalise(name), spec, relative, _line_of(text, name)))
    python = project.get("requires-python")
    return found, python if isinstance(python, str) else None


def _poetry_groups(poetry: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for group in (poetry.get("group", {}) or {}).values():
        yield (group or {}).get("dependencies", {})
    yield poetry.get("dev-dependencies", {}) or {}


def from_requirements_txt(path: Path, relative: str) -> list[Requirement]:
    text = read_text(path) or ""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        req = parse_line(line, relative, number)
        if req is not None:
            found.append(req)
    return found


def from_setup_py(path: Path, relative: str) -> list[Requirement]:
    """Literal lists given to ``setup()``'s ``install_requires``, ``extras_require`` and
    ``requires``, directly or through a module-level name (``install_requires=deps``)."""
    text = read_text(path)
    if text is None:
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    assigned = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found: list[Requirement] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.keyword) or node.arg not in _SETUP_KEYWORDS:
            continue
        value = node.value
        if isinstance(value, ast.Name):
            value = assigned.get(value.id, value)
        for text, line in _strings(value):
            req = parse_line(text, relative, line)
            if req is not None:
                found.append(req)
    return found


def _strings(node: ast.AST) -> Iterator[tuple[str, int]]:
    """The string literals (and their lines) of a requirement list or an extras dict
    (not its keys: the names of the extras)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value, node.lineno
    elif isinstance(node, ast.Dict):
        for value in node.values:
            yield from _strings(value)
    else:
        for child in ast.iter_child_nodes(node):
            yield from _strings(child)


_SETUP_KEYWORDS = ("install_requires", "extras_require", "requires")


def from_setup_cfg(path: Path, relative: str) -> list[Requirement]:
    text = read_text(path)
    if text is None:
        return []
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    values = []
    if parser.has_option("options", "install_requires"):
        values.append(parser.get("options", "install_requires"))
    if parser.has_section("options.extras_require"):
        values.extend(value for _, value in parser.items("options.extras_require"))
    found = []
    for value in values:
        for line in value.splitlines():
            req = parse_line(line, relative, _line_of(text, line.strip()) if line.strip() else None)
            if req is not None:
                found.append(req)
    return found


_CONDA_ITEM = re.compile(r"^\s*-\s+([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:([=<>!~]=?)\s*([^\s#]+))?")


def from_environment_yml(path: Path, relative: str) -> list[Requirement]:
    """Conda's ``dependencies:`` list (and its ``pip:`` sub-list), read line by line.

    A YAML parser is not a dependency of torchwise; the list items are simple enough.
    Conda pins with one ``=`` (``pytorch=2.1``); ``pytorch`` is torch's conda name.
    """
    text = read_text(path) or ""
    found = []
    in_dependencies = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not line.startswith((" ", "-", "\t")) and stripped:
            in_dependencies = stripped.startswith("dependencies:")
            continue
        if not in_dependencies or stripped in ("- pip:", "- pip"):
            continue
        match = _CONDA_ITEM.match(line)
        if match is None:
            continue
        name, operator, version = match.groups()
        name = {"pytorch": "torch", "pytorch-cuda": "cuda"}.get(name.lower(), name)
        spec = ""
        if operator and version:
            spec = f"=={version}" if operator == "=" else f"{operator}{version}"
        if name.lower() in ("python", "pip", "cuda"):
            continue
        found.append(Requirement(normalise(name), spec, relative, number))
    return found


def requirements_in(path: Path, relative: str) -> tuple[list[Requirement], str | None]:
    """What one packaging file declares, chosen by its name; and, for a
    ``pyproject.toml``, its ``requires-python``. ``([], None)`` for any other file."""
    parts = relative.split("/")
    name = parts[-1].lower()
    if name == "pyproject.toml":
        return from_pyproject(path, relative)
    if (name.startswith("requirements") and name.endswith((".txt", ".in"))) or (
        parts[0] == "requirements" and name.endswith(".txt")
    ):
        return from_requirements_txt(path, relative), None
    if name == "setup.py":
        return from_setup_py(path, relative), None
    if name == "setup.cfg":
        return from_setup_cfg(path, relative), None
    if name in ("environment.yml", "environment.yaml", "conda.yaml", "conda.yml"):
        return from_environment_yml(path, relative), None
    return [], None
