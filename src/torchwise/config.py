"""Reading ``[tool.torchwise]`` from the nearest ``pyproject.toml``.

This module only finds and parses the table; each capability interprets its own
keys (``review`` reads ``select``/``ignore``/..., ``target`` reads ``models``).
Keys are accepted with dashes or underscores (``min-torch-version`` or
``min_torch_version``), as in ruff.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchwise.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@dataclass(frozen=True)
class ToolConfig:
    """The ``[tool.torchwise]`` table and where it came from.

    ``root`` is the directory holding the pyproject.toml (paths in the config are
    relative to it); both are ``None``/empty when no config was found.
    """

    path: Path | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> Path | None:
        return None if self.path is None else self.path.parent

    def get(self, key: str, default: Any = None) -> Any:
        """Look a key up by its dashed or underscored spelling."""
        for spelling in (key, key.replace("_", "-"), key.replace("-", "_")):
            if spelling in self.data:
                return self.data[spelling]
        return default


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` (a file or directory)."""
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate_dir in (directory, *directory.parents):
        candidate = candidate_dir / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path | None = None, *, path: Path | None = None) -> ToolConfig:
    """Load ``[tool.torchwise]`` from ``path``, or from the pyproject nearest ``start``.

    A pyproject without the table yields an empty config; a file that is not
    valid TOML is a :class:`ConfigError`, because silently ignoring a user's
    configuration would make every later result wrong.
    """
    if path is None:
        path = find_pyproject(start if start is not None else Path.cwd())
        if path is None:
            return ToolConfig()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table = document.get("tool", {}).get("torchwise", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchwise] must be a table")
    return ToolConfig(path=path, data=table)
