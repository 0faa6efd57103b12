"""Minimal project trees for the knowledge tests: write them, read their knowledge."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchwise.project.knowledge import gather_knowledge
from torchwise.project.schema import ProjectKnowledge


def write(root: Path, files: dict[str, str]) -> Path:
    """Each ``relative path -> text`` under ``root`` (dedented), directories made."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def know(root: Path) -> ProjectKnowledge:
    """The static knowledge of ``root``, without probing devices."""
    return gather_knowledge(root, probe_devices=False)
