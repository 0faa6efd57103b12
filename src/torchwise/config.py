"""Reading ``[tool.torchwise]`` from the nearest ``pyproject.toml``.

This module finds and parses the table and rejects keys no capability reads
(a typo such as ``selectt`` would otherwise be silently ignored and every later
result would be wrong); each capability interprets its own keys (``review``
reads ``select``/``ignore``/..., ``target`` reads ``models``). Keys are accepted
with dashes or underscores (``min-torch-version`` or ``min_torch_version``), as
in ruff. A capability that reads a new key adds it to the tables below.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchwise.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


#: Keys of ``[tool.torchwise]`` itself, dashed spelling.
KNOWN_KEYS: frozenset[str] = frozenset(
    {
        # review
        "select",
        "extend-select",
        "ignore",
        "per-file-ignores",
        "exclude",
        "min-torch-version",
        # model commands
        "models",
    }
)

#: Keys of one ``[tool.torchwise.models.NAME]`` table, dashed spelling.
KNOWN_MODEL_KEYS: frozenset[str] = frozenset(
    {"target", "input", "inputs", "init-kwargs", "build", "build-on", "batch-dim"}
)


def _dashed(key: str) -> str:
    return key.replace("_", "-")


def _check_keys(table: Mapping[str, object], known: Iterable[str], where: str, path: Path) -> None:
    known = sorted(known)
    for key in table:
        if _dashed(key) in known:
            continue
        close = difflib.get_close_matches(_dashed(key), known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
        raise ConfigError(f"{path}: unknown key {key!r} in {where}", hint=hint)


def validate(table: Mapping[str, object], path: Path) -> None:
    """Raise :class:`ConfigError` for a key in ``[tool.torchwise]`` that nothing reads."""
    _check_keys(table, KNOWN_KEYS, "[tool.torchwise]", path)
    models = next((table[k] for k in table if _dashed(k) == "models"), None)
    if models is None:
        return
    if not isinstance(models, dict):
        raise ConfigError(f"{path}: [tool.torchwise.models] must be a table of model tables")
    for name, entry in models.items():
        where = f"[tool.torchwise.models.{name}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: {where} must be a table, e.g. target = 'model.py:Net'")
        _check_keys(entry, KNOWN_MODEL_KEYS, where, path)


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
    except OSError as exc:  # a directory, no permission, an I/O error
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table = document.get("tool", {}).get("torchwise", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchwise] must be a table")
    validate(table, path)
    return ToolConfig(path=path, data=table)
