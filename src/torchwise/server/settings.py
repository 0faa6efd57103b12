"""The review settings for each file: ``[tool.torchwise]`` of its nearest
``pyproject.toml``, as ``torchwise review`` reads it, kept until that file changes.

The editor may add rule selections of its own (``initializationOptions``), which
act as ``review``'s command-line flags do: ``select`` replaces the configured
set, ``extend_select`` and ``ignore`` add to the configured lists. Each lookup
costs the ``stat`` calls that find the nearest ``pyproject.toml`` and one of it:
a configuration edited on disk, by the editor or anything else, is read again
at the next analysis.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from torchwise.config import ToolConfig, find_pyproject, load_config
from torchwise.errors import TorchwiseError
from torchwise.review import ReviewSettings, build_settings


def _codes(options: Mapping[str, object], *keys: str) -> tuple[str, ...]:
    for key in keys:
        value = options.get(key)
        if isinstance(value, str):
            return tuple(code.strip() for code in value.split(",") if code.strip())
        if isinstance(value, list | tuple):
            return tuple(str(code).strip() for code in value if str(code).strip())
    return ()


@dataclass(frozen=True)
class ClientOptions:
    """What the editor asked for in ``initializationOptions``."""

    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    #: Offer fixes marked unsafe as code actions too (never in "fix all").
    unsafe_fixes: bool = False

    @classmethod
    def from_options(cls, options: object) -> ClientOptions:
        """Read ``initializationOptions`` (keys in snake_case or camelCase); anything
        that is not a table is ignored."""
        if not isinstance(options, Mapping):
            return cls()
        return cls(
            select=_codes(options, "select"),
            extend_select=_codes(options, "extend_select", "extendSelect"),
            ignore=_codes(options, "ignore"),
            unsafe_fixes=options.get("unsafe_fixes", options.get("unsafeFixes")) is True,
        )


@dataclass(frozen=True)
class Resolved:
    """The settings for a file, and the configuration problem, if any, that made
    the server fall back to review's defaults."""

    settings: ReviewSettings
    config_path: Path | None
    error: str | None = None


@dataclass
class SettingsCache:
    """Settings per ``pyproject.toml``, re-read when its ``stat`` changes."""

    options: ClientOptions = field(default_factory=ClientOptions)
    _cache: dict[Path | None, tuple[tuple[int, int, int], Resolved]] = field(default_factory=dict)

    def for_path(self, path: str) -> Resolved:
        """The settings that apply to the file at ``path`` (it need not exist)."""
        config_path = find_pyproject(Path(path))
        key = _stat_key(config_path)
        cached = self._cache.get(config_path)
        if cached is not None and cached[0] == key:
            return cached[1]
        resolved = self._load(config_path)
        self._cache[config_path] = (key, resolved)
        return resolved

    def clear(self) -> None:
        """Forget every configuration read (the editor says one changed)."""
        self._cache.clear()

    def _load(self, config_path: Path | None) -> Resolved:
        try:
            config = load_config(path=config_path) if config_path else ToolConfig()
            settings = build_settings(
                config,
                select=self.options.select or None,
                extend_select=self.options.extend_select,
                ignore=self.options.ignore,
            )
        except TorchwiseError as exc:
            return Resolved(ReviewSettings(), config_path, error=str(exc))
        return Resolved(settings, config_path)


def _stat_key(path: Path | None) -> tuple[int, int, int]:
    if path is None:
        return (0, 0, 0)
    try:
        stat = os.stat(path)
    except OSError:
        return (-1, 0, 0)
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)
