"""The torch versions a project declares, from its packaging files.

Read (never executed, by :mod:`torchwise.packaging`) from the nearest
directory, walking up from a source file, that declares a ``torch`` requirement
in ``pyproject.toml`` (PEP 621 dependencies, optional dependencies and
dependency groups, Poetry), ``setup.cfg``, ``setup.py`` (its literal
requirement lists), ``requirements*.txt`` or a conda environment file
(``environment*.yml``/``.yaml``, where ``pytorch=2.2.2`` is conda's
``==2.2.2``). ``torch==1.13.1`` means
1.13 only; ``torch>=2.1,<2.6`` 2.1 up to 2.5; ``~=2.1`` and Poetry's ``^2.1``
2.x from 2.1. An unpinned ``torch`` says nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from torchwise.packaging import requirements_in
from torchwise.review.index.records import TorchRange

_CLAUSE = re.compile(r"(?P<op>===|==|>=|<=|~=|!=|>|<|\^)\s*(?P<version>\d+(?:\.\d+)*)")
_FILES = ("pyproject.toml", "setup.cfg", "setup.py")


def parse_spec(spec: str) -> TorchRange | None:
    """The range of a requirement specifier (``>=2.1,<2.6``); None if it says nothing."""
    minimum: tuple[int, int] | None = None
    below: tuple[int, int] | None = None
    for clause in _CLAUSE.finditer(spec):
        op, numbers = clause.group("op"), [int(n) for n in clause.group("version").split(".")]
        version = (numbers[0], numbers[1] if len(numbers) > 1 else 0)
        if op in {"==", "==="}:
            minimum, below = version, (version[0], version[1] + 1)
        elif op in {">=", ">"}:
            minimum = version
        elif op == "<":
            # `<2.6` and `<2.6.0` exclude 2.6; `<2.6.1` still allows 2.6.0.
            patch = len(numbers) > 2 and any(numbers[2:])
            below = (version[0], version[1] + 1) if patch else version
        elif op == "<=":
            below = (version[0], version[1] + 1)
        elif op == "^" or (op == "~=" and len(numbers) <= 2):
            minimum, below = version, (version[0] + 1, 0)
        elif op == "~=":
            minimum, below = version, (version[0], version[1] + 1)
    if minimum is None and below is None:
        return None
    return TorchRange(minimum, below)


def packaging_files(directory: Path) -> list[Path]:
    """The files of one directory that may declare a torch range (present or not)."""
    return (
        [directory / name for name in _FILES]
        + sorted(directory.glob("requirements*.txt"))
        + sorted(directory.glob("environment*.y*ml"))
    )


#: A conda dependency line: ``- pytorch=2.2.2``, ``- torch>=1.13``, ``- pytorch==1.13.1``.
_CONDA_TORCH = re.compile(
    r"^\s*-\s*(?:pytorch|torch)\s*(?P<spec>(?:[=<>!~]=?)\s*[\d.*]+[^#\n]*)", re.M
)


def _conda_range(path: Path) -> TorchRange | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:200_000]
    except OSError:
        return None
    match = _CONDA_TORCH.search(text)
    if match is None:
        return None
    spec = match.group("spec").strip()
    if spec.startswith("=") and not spec.startswith("=="):
        spec = "=" + spec  # conda's `=2.2.2` (any build of 2.2.2) is pip's `==2.2.2`
    return parse_spec(spec.replace("*", "0"))


def declared_in(directory: Path) -> TorchRange | None:
    """The torch range declared by the packaging files of one directory."""
    for path in packaging_files(directory):
        if not path.is_file():
            continue
        if path.suffix in (".yml", ".yaml"):
            conda = _conda_range(path)
            if conda is not None:
                return TorchRange(conda.minimum, conda.below, path.name)
            continue
        requirements, _ = requirements_in(path, path.name)
        for requirement in requirements:
            found = parse_spec(requirement.spec) if requirement.name == "torch" else None
            if found is not None:
                return TorchRange(found.minimum, found.below, path.name)
    return None


class Declarations:
    """Declared torch ranges by directory, each directory read once."""

    def __init__(self) -> None:
        self._found: dict[Path, TorchRange | None] = {}

    def nearest(self, directory: Path) -> tuple[Path, TorchRange] | None:
        """The nearest directory at or above ``directory`` that declares a range."""
        directory = directory.resolve()
        for candidate in (directory, *directory.parents):
            if candidate not in self._found:
                self._found[candidate] = declared_in(candidate)
            found = self._found[candidate]
            if found is not None:
                return candidate, found
            if (candidate / ".git").exists():
                return None  # the repository's root: nothing above belongs to it
        return None

    def consulted(self) -> list[Path]:
        """Every directory looked in and packaging file looked at, so far: what a
        cached answer depends on (a file added to a directory changes its mtime)."""
        return [
            path for directory in self._found for path in (directory, *packaging_files(directory))
        ]
