"""The workspace root: every path an agent names must resolve inside it.

An MCP client is driven by a language model, and a model can be talked into
asking for ``../../.ssh/id_rsa`` or ``/etc/passwd``. So each path is resolved
(symbolic links included) before it is used and refused unless it lands inside
the root given at start. Model targets are held to the same root: a
``file.py:Name`` must be a workspace file, a configured name must come from the
workspace's own ``pyproject.toml`` and point inside it, and targets that import
installed packages (``package.module:Name`` outside the workspace, ``hf:``,
``timm:``) are refused; the built-in ``zoo:`` models are torchwise's own code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchwise.errors import TorchwiseError


class OutsideWorkspace(TorchwiseError):
    """A path or target that resolves outside the workspace root."""


@dataclass(frozen=True)
class ResolvedModel:
    """A target the worker may build: the text for resolve_target, and its config start."""

    target: str
    config_start: Path | None


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def at(cls, root: str | Path) -> Workspace:
        resolved = Path(root).expanduser().resolve()
        if not resolved.is_dir():
            raise TorchwiseError(f"workspace root {root} is not a directory")
        return cls(resolved)

    def path(self, value: str, *, must_exist: bool = True) -> Path:
        """``value`` (relative to the root, or absolute) resolved, if it is inside the root."""
        if not value or "\x00" in value:
            raise TorchwiseError("empty or invalid path")
        candidate = Path(os.path.expanduser(value))
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve()  # follows every symbolic link on the way
        if resolved != self.root and self.root not in resolved.parents:
            raise OutsideWorkspace(
                f"{value!r} is outside the workspace {self.root}",
                hint="paths are relative to the workspace root and must stay inside it",
            )
        if must_exist and not resolved.exists():
            raise TorchwiseError(f"{value!r} does not exist in the workspace")
        return resolved

    def relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root).as_posix() or "."
        except ValueError:
            return str(path)

    def model(self, target: str) -> ResolvedModel:
        """A model target confined to the workspace (see the module docstring)."""
        target = target.strip()
        if target.startswith("zoo:"):
            return ResolvedModel(target, None)
        if target.startswith(("hf:", "timm:")):
            raise OutsideWorkspace(
                f"{target!r} builds a model from an installed package, outside the workspace",
                hint="name a model file of the workspace, e.g. model.py:Net",
            )
        if ":" not in target:
            return self._configured(target)
        module_ref, _, attr = target.rpartition(":")
        return ResolvedModel(f"{self._module_file(module_ref)}:{attr}", None)

    def _module_file(self, module_ref: str) -> Path:
        if module_ref.endswith(".py") or "/" in module_ref or os.sep in module_ref:
            return self.path(module_ref)
        # package.module: only as a file of the workspace (or its src/ layout).
        parts = module_ref.split(".")
        for base in (self.root, self.root / "src"):
            for candidate in (
                base.joinpath(*parts).with_suffix(".py"),
                base.joinpath(*parts, "__init__.py"),
            ):
                if candidate.is_file():
                    return self.path(str(candidate))
        raise OutsideWorkspace(
            f"module {module_ref!r} is not a file of the workspace",
            hint="name the model by its file, e.g. path/to/model.py:Net",
        )

    def _configured(self, name: str) -> ResolvedModel:
        from torchwise.config import load_config

        pyproject = self.root / "pyproject.toml"
        if not pyproject.is_file():
            raise TorchwiseError(
                f"unknown target {name!r}: the workspace has no pyproject.toml to configure it",
                hint="a target is path/to/model.py:Name or a [tool.torchwise.models] name",
            )
        models: dict[str, Any] = load_config(path=pyproject).get("models", {}) or {}
        entry = models.get(name)
        if not isinstance(entry, dict):
            known = ", ".join(sorted(models)) or "none"
            raise TorchwiseError(
                f"unknown target {name!r}",
                hint=f"models configured in the workspace: {known}; or use path/to/model.py:Name",
            )
        inner = entry.get("target")
        if not isinstance(inner, str) or inner.startswith("zoo:"):
            return ResolvedModel(name, self.root)
        if inner.startswith(("hf:", "timm:")):
            raise OutsideWorkspace(
                f"[tool.torchwise.models.{name}] builds {inner!r} from an installed package, "
                "outside the workspace"
            )
        # "file.py:Name", "package.module:Name", or a bare "file.py" built by `build = ...`
        module_ref = inner.rpartition(":")[0] if ":" in inner else inner
        if module_ref.endswith(".py") or "/" in module_ref:
            self.path(str(self.root / module_ref))  # refuses a config pointing outside
        else:
            self._module_file(module_ref)
        return ResolvedModel(name, self.root)
