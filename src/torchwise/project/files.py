"""One walk over a project's tree: the files every later step looks at.

The walk never follows symbolic links out of the root, skips what is tooling or
someone else's code (virtual environments, caches, ``.git``, ``node_modules``,
``site-packages``), and stops at :data:`MAX_ENTRIES` entries so that a data
directory with a million images cannot stall it. Checkpoints are looked for
everywhere else, ignored by git or not: they usually are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from torchwise import packaging

#: Directory names never entered: tooling, caches, environments, vendored trees.
SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".venv", "venv", "env", ".env", ".tox", ".nox", "node_modules",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".torchwise_cache",
        ".ipynb_checkpoints", "site-packages", "dist-packages", "build", "dist", ".eggs",
        ".idea", ".vscode", ".cache", "wandb", "mlruns",
    }
)  # fmt: skip

CHECKPOINT_SUFFIXES = frozenset({".pt", ".pth", ".bin", ".ckpt", ".safetensors", ".pkl", ".tar"})
CONFIG_SUFFIXES = frozenset({".yaml", ".yml", ".json", ".toml", ".cfg", ".ini"})
#: Stop walking after this many files and directories (the rest is reported as a note).
MAX_ENTRIES = 50_000
#: Python files larger than this are counted but not parsed (generated code, vendored blobs).
MAX_PARSE_BYTES = 1_500_000


@dataclass
class ProjectFiles:
    """What the walk found, as paths relative to ``root`` (POSIX, sorted)."""

    root: Path
    python: list[str] = field(default_factory=list)
    notebooks: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    configs: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    truncated: bool = False

    def path(self, relative: str) -> Path:
        return self.root / relative


def _is_checkpoint(name: str) -> bool:
    suffix = os.path.splitext(name)[1].lower()
    if suffix == ".tar":  # only the legacy torch.save tar format, e.g. model.pth.tar
        return name.lower().endswith((".pth.tar", ".pt.tar", ".ckpt.tar"))
    if suffix == ".pkl":
        return False  # too often a dataset or a sklearn pickle; scan it explicitly
    return suffix in CHECKPOINT_SUFFIXES


def walk(root: Path) -> ProjectFiles:
    """Every file of interest under ``root`` (symlinks to directories are not followed)."""
    found = ProjectFiles(root)
    entries = 0
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in items:
            entries += 1
            if entries > MAX_ENTRIES:
                found.truncated = True
                stack.clear()
                break
            if entry.is_dir(follow_symlinks=False):
                name = entry.name
                if name in SKIP_DIRS or name.endswith(".egg-info"):
                    continue
                stack.append(Path(entry.path))
                found.dirs.append(Path(entry.path).relative_to(root).as_posix())
                continue
            if not entry.is_file(follow_symlinks=False):
                continue  # a symlink (possibly out of the tree), a socket, ...
            relative = Path(entry.path).relative_to(root).as_posix()
            _classify(found, entry.name, relative)
    buckets = (found.python, found.notebooks, found.checkpoints, found.configs, found.other)
    for bucket in (*buckets, found.dirs):
        bucket.sort()
    return found


def _classify(found: ProjectFiles, name: str, relative: str) -> None:
    lower = name.lower()
    if lower.endswith(".py"):
        found.python.append(relative)
    elif lower.endswith(".ipynb"):
        found.notebooks.append(relative)
    elif _is_checkpoint(name):
        found.checkpoints.append(relative)
    elif os.path.splitext(lower)[1] in CONFIG_SUFFIXES:
        found.configs.append(relative)
    else:
        found.other.append(relative)


def read_text(path: Path, limit: int = MAX_PARSE_BYTES) -> str | None:
    """The file's text, or None when it is too large or unreadable."""
    return packaging.read_text(path, limit)
