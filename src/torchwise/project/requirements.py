"""Which packaging files speak for a project, read by :mod:`torchwise.packaging`."""

from __future__ import annotations

from pathlib import Path

from torchwise.packaging import Requirement, requirements_in

#: the project's own metadata first: the first declaration of a package wins
_PRIORITY = {"pyproject.toml": 0, "setup.cfg": 1, "setup.py": 2}


def declared(root: Path, files: list[str]) -> tuple[list[Requirement], str | None]:
    """Every requirement declared at the project's top level (and in requirements/
    or envs/ directories), with the ``requires-python`` of its pyproject.toml."""
    found: list[Requirement] = []
    python: str | None = None
    for relative in sorted(files, key=lambda p: (_PRIORITY.get(p.rsplit("/", 1)[-1], 5), p)):
        parts = relative.split("/")
        shallow = len(parts) == 1 or (len(parts) == 2 and parts[0] in ("requirements", "envs"))
        if not shallow:
            continue
        requirements, requires_python = requirements_in(root / relative, relative)
        found.extend(requirements)
        python = requires_python or python
    return found, python
