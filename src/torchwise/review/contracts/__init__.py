"""torch's own contracts, release by release, as review reads them.

``data/contracts.sqlite`` is generated from the released wheels of torch,
torchvision, torchaudio and torchtext (``scripts/gen_contracts.py``; see
:mod:`torchwise.review.contracts.model`). It is opened on the first question
and only the rows asked for are read, so a review that never meets a
library name pays nothing.

A name's status in a release is one of three: it exists; it is known to be
missing (its module exists in that release and answers no such name); or
unknown (the module answers names it does not list, or the name is an
attribute of a class or object, which the tables do not enumerate). Only a
known absence is ever reported.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from torchwise.review.contracts.model import (
    Api,
    Definition,
    Deprecation,
    Guard,
    Param,
    Signature,
)

DATA = Path(__file__).parent / "data" / "contracts.sqlite"

#: The libraries the tables cover, by top-level package.
LIBRARIES = ("torch", "torchvision", "torchaudio", "torchtext")


def library_of(name: str) -> str | None:
    top = name.split(".", 1)[0]
    return top if top in LIBRARIES else None


@dataclass(frozen=True)
class Status:
    """Where a name exists, is known missing, and is unknown, as release masks."""

    present: int
    missing: int
    unknown: int


class Contracts:
    """The generated tables, read on demand."""

    def __init__(self, path: Path = DATA) -> None:
        self.path = path
        self._apis: dict[str, Api | None] = {}
        self._definitions: dict[str, Definition | None] = {}
        self._meta: dict[str, object] = {}

    @cached_property
    def _database(self) -> sqlite3.Connection | None:
        if not self.path.is_file():
            return None
        # Read-only and immutable: safe from several review workers at once.
        return sqlite3.connect(
            f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )

    @property
    def available(self) -> bool:
        return self._database is not None

    def _row(self, query: str, key: str) -> object:
        database = self._database
        if database is None:
            return None
        row = database.execute(query, (key,)).fetchone()
        if row is None:
            return None
        value = row[0]
        if isinstance(value, bytes):  # definitions are stored compressed
            value = zlib.decompress(value)
        return json.loads(value)

    def _meta_value(self, key: str) -> object:
        if key not in self._meta:
            self._meta[key] = self._row("SELECT value FROM meta WHERE key = ?", key)
        return self._meta[key]

    def releases(self, library: str) -> tuple[str, ...]:
        found = self._meta_value(f"{library}.releases")
        return tuple(found) if isinstance(found, list) else ()

    def torch_releases(self, library: str) -> tuple[str | None, ...]:
        """For a companion library, the torch release each of its releases was
        built for (aligned with :meth:`releases`); () for torch itself."""
        found = self._meta_value(f"{library}.torch")
        return tuple(found) if isinstance(found, list) else ()

    def open_modules(self, library: str) -> dict[str, int]:
        found = self._meta_value(f"{library}.open")
        return found if isinstance(found, dict) else {}

    def api(self, name: str) -> Api | None:
        if name not in self._apis:
            targets = self._row("SELECT targets FROM names WHERE name = ?", name)
            api = None
            if isinstance(targets, list) and targets:
                present = 0
                for mask, _ in targets:
                    present |= mask
                api = Api(name, present, [(mask, key) for mask, key in targets])
            self._apis[name] = api
        return self._apis[name]

    def definition(self, key: str) -> Definition | None:
        if key not in self._definitions:
            record = self._row("SELECT record FROM definitions WHERE key = ?", key)
            self._definitions[key] = _definition(key, record) if isinstance(record, dict) else None
        return self._definitions[key]

    def status(self, name: str) -> Status | None:
        """Where ``name`` exists; None when its library is not in the tables."""
        library = library_of(name)
        if library is None or not self.releases(library):
            return None
        every = (1 << len(self.releases(library))) - 1
        api = self.api(name)
        present = api.present if api is not None else 0
        missing = 0
        # The nearest enclosing module that exists decides: a closed module
        # lacking the next part means the name is missing there.
        parts = name.split(".")
        remaining = every & ~present
        open_modules = self.open_modules(library)
        for end in range(len(parts) - 1, 0, -1):
            if not remaining:
                break
            prefix = ".".join(parts[:end])
            owner = self.api(prefix)
            if owner is None:
                continue
            for mask, key in owner.targets:
                bits = mask & remaining
                if not bits:
                    continue
                definition = self.definition(key) if key else None
                is_module = definition is not None and definition.kind == "module"
                if is_module:
                    missing |= bits & ~open_modules.get(key, 0)
                remaining &= ~bits  # decided by this prefix: missing, or unknown
        return Status(present, missing, every & ~present & ~missing)


def _signature(overloads: list[list[list[object]]]) -> tuple[Signature, ...]:
    return tuple(
        Signature(tuple(Param(str(name), str(kind), default) for name, kind, default in params))
        for params in overloads
    )


def _definition(key: str, record: dict[str, object]) -> Definition:
    definition = Definition(key, str(record.get("kind", "value")))
    for mask, overloads in record.get("signatures", []):  # type: ignore[attr-defined]
        definition.signatures.append((mask, _signature(overloads)))
    for mask, guard in record.get("guards", []):  # type: ignore[attr-defined]
        definition.guards.append(
            Guard(
                guard["when"],
                guard.get("raises"),
                guard.get("warns"),
                tuple(guard.get("message", ())),
                mask,
                bool(guard.get("deprecation")),
            )
        )
    for mask, item in record.get("deprecations", []):  # type: ignore[attr-defined]
        definition.deprecations.append(Deprecation(item["message"], item["category"], mask))
    return definition


def describe(releases: tuple[str, ...], mask: int) -> str:
    """Release mask as runs: ``1.8-1.13, 2.2``."""
    runs: list[str] = []
    start: int | None = None
    for index in range(len(releases) + 1):
        inside = index < len(releases) and mask >> index & 1
        if inside and start is None:
            start = index
        elif not inside and start is not None:
            first, last = releases[start], releases[index - 1]
            runs.append(first if start == index - 1 else f"{first}-{last}")
            start = None
    return ", ".join(runs)


__all__ = ["Contracts", "Status", "describe", "library_of"]
