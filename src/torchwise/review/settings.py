"""Review settings: ``[tool.torchwise]`` merged with command-line flags.

Configuration keys (dashes or underscores)::

    [tool.torchwise]
    select = ["TW1", "TW3"]            # replaces the default rule set
    extend-select = ["TW202"]           # adds to it (e.g. rules off by default)
    ignore = ["TW201"]
    per-file-ignores = { "tests/*" = ["TW301"] }
    exclude = ["legacy/*"]              # paths (globs) never reviewed
    min-torch-version = "2.4"           # the oldest torch the code must run on
                                        # (default: what the project declares, else 2.4)

Command-line flags override the file: ``--select`` replaces ``select``, and
``--ignore``/``--extend-select`` add to the configured lists.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from torchwise.config import ToolConfig
from torchwise.errors import ConfigError
from torchwise.review.registry import all_rules, select_rules

DEFAULT_MIN_TORCH = (2, 4)


@dataclass(frozen=True)
class ReviewSettings:
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    #: None: the minimum the project declares (pyproject.toml, requirements*.txt,
    #: setup.cfg, setup.py), else DEFAULT_MIN_TORCH.
    min_torch_version: tuple[int, int] | None = None
    root: Path | None = None  # where relative globs are anchored
    enabled: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        known = all_rules()
        for prefix in (*(self.select or ()), *self.extend_select, *self.ignore):
            cleaned = prefix.strip().upper()
            if cleaned != "ALL" and not any(code.startswith(cleaned) for code in known):
                raise ConfigError(
                    f"unknown rule code or prefix {prefix!r}",
                    hint="`torchwise rules` lists every code",
                )
        enabled = select_rules(self.select, self.ignore, self.extend_select)
        object.__setattr__(self, "enabled", enabled)

    def enabled_for(self, path: str) -> frozenset[str]:
        """The codes enabled for one file, after ``per-file-ignores``."""
        if not self.per_file_ignores:
            return self.enabled
        relative = self._relative(path)
        ignored: set[str] = set()
        for pattern, codes in self.per_file_ignores:
            if _matches(relative, pattern):
                ignored |= {
                    code for code in self.enabled for prefix in codes if code.startswith(prefix)
                }
        return self.enabled - ignored

    def is_excluded(self, path: str) -> bool:
        relative = self._relative(path)
        return any(_matches(relative, pattern) for pattern in self.exclude)

    def _relative(self, path: str) -> str:
        resolved = Path(path).resolve()
        if self.root is not None:
            try:
                return resolved.relative_to(self.root.resolve()).as_posix()
            except ValueError:
                pass
        return PurePosixPath(path).as_posix()


def _matches(relative: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative, f"{pattern}/*"):
        return True
    # A bare name ("legacy", "*_test.py") matches at any depth, as in .gitignore.
    return "/" not in pattern and any(
        fnmatch.fnmatch(part, pattern) for part in relative.split("/")
    )


def parse_version(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*", text)
    if match is None:
        raise ConfigError(f"min-torch-version must look like '2.4', not {text!r}")
    return int(match.group(1)), int(match.group(2))


def _string_list(config: ToolConfig, key: str) -> tuple[str, ...] | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"[tool.torchwise] {key} must be a list of strings")
    return tuple(value)


def build_settings(
    config: ToolConfig,
    *,
    select: Sequence[str] | None = None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    min_torch_version: str | None = None,
) -> ReviewSettings:
    """Merge the config file with command-line flags (flags win)."""
    per_file = config.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError("[tool.torchwise] per-file-ignores must be a table of glob = [codes]")
    version_text = min_torch_version or config.get("min-torch-version")
    return ReviewSettings(
        select=tuple(select) if select else _string_list(config, "select"),
        extend_select=(*(_string_list(config, "extend-select") or ()), *extend_select),
        ignore=(*(_string_list(config, "ignore") or ()), *ignore),
        per_file_ignores=tuple(
            (pattern, tuple(codes) if isinstance(codes, list) else (str(codes),))
            for pattern, codes in per_file.items()
        ),
        exclude=_string_list(config, "exclude") or (),
        min_torch_version=parse_version(str(version_text)) if version_text else None,
        root=config.root,
    )
