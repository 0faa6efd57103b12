"""Generate review's API contract tables from the released wheels.

    python scripts/gen_contracts.py                      # torch, torchvision, torchaudio, torchtext
    python scripts/gen_contracts.py torch --first 1.8   # one library
    python scripts/gen_contracts.py --cache ~/.cache/torchwise-wheels

For every minor release of a library (the newest patch release of each, the
smallest wheel PyPI has for it: the Python sources are the same on every
platform) it reads the sources, never importing them, and records every
public module and name, what each name resolves to, the signature of each
callable, the checks its source makes on its arguments and the deprecation
warnings it emits (``scripts/contracts/``). The releases are merged into one
table per library, ``src/torchwise/review/contracts/data/<library>.json``:
each fact with the set of releases it held in. It also writes the misuse
catalogue's raw sites (``--sites FILE``): every ``raise`` and warning met in
the bodies it read.

The tables are data, checked in; review reads them and never downloads
anything. Run this again when a release comes out.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import sqlite3
import sys
import zlib
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from contracts.extract import Reader, Site
from contracts.namespace import CLASS, DEF, LAZY, MODULE, Namespace, Target
from contracts.sources import Release, built_for, download, releases, source_files

DATA = Path(__file__).parent.parent / "src" / "torchwise" / "review" / "contracts" / "data"

#: library -> (top-level package, first minor release, module prefixes left out).
LIBRARIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "torch": (
        "torch",
        "1.8",
        (
            "torch.testing._internal",
            "torch._inductor",
            "torch._dynamo",
            "torch._export",
            "torch._functorch",
            "torch._higher_order_ops",
            "torch._refs",
            "torch._prims",
            "torch._decomp",
            "torch._subclasses",
            "torch._library",
            "torch._logging",
            "torch._numpy",
            "torch.include",
            "torch.utils.benchmark",
            "torch.utils.hipify",
            "torch.onnx._internal",
            "torch.fx.experimental",
            "torch.distributed._",
            "torch.ao.quantization.fx",
            "torch.ao.pruning",
            "torch._vendor",
        ),
    ),
    "torchvision": ("torchvision", "0.9", ()),
    "torchaudio": ("torchaudio", "0.8", ()),
    "torchtext": ("torchtext", "0.9", ()),
}


def public_modules(namespace: Namespace, top: str, excluded: tuple[str, ...]) -> list[str]:
    """Modules a user may import: every package on the way public (a private
    leaf module such as ``torch._six`` is kept: old code imports it)."""
    found = []
    for name in namespace.modules:
        parts = name.split(".")
        if parts[0] != top or name.startswith(excluded):
            continue
        if any(part.startswith("_") for part in parts[1:-1]):
            continue
        found.append(name)
    return sorted(found)


class ReleaseTable:
    """What one release says: names, modules, definitions."""

    def __init__(self, namespace: Namespace, top: str, excluded: tuple[str, ...]) -> None:
        self.namespace = namespace
        self.reader = Reader(namespace)
        self.names: dict[str, str] = {}  # public name -> definition key ("" for a module)
        self.kinds: dict[str, str] = {}  # definition key -> kind
        self.contracts: dict[str, dict[str, Any]] = {}
        self.open: set[str] = set()
        self.modules = public_modules(namespace, top, excluded)
        for module in self.modules:
            self._module(module)

    def _module(self, module: str) -> None:
        self.names[module] = module
        self.kinds[module] = MODULE
        if self.namespace.modules[module].open:
            self.open.add(module)
        for name in sorted(self.namespace.names(module)):
            target = self.namespace.member(module, name, set())
            if target is None:
                continue
            dotted = f"{module}.{name}"
            if target.kind == MODULE:
                if target.module not in self.kinds:
                    self.kinds[target.module] = MODULE
                self.names[dotted] = target.module
                continue
            self.names[dotted] = target.key
            self.kinds.setdefault(target.key, target.kind)
            if target.kind in (DEF, CLASS) and target.key not in self.contracts:
                self.contracts[target.key] = self._contract(target)

    def _contract(self, target: Target) -> dict[str, Any]:
        try:
            contract = self.reader.contract(target)
        except RecursionError:
            return {"signatures": [], "guards": [], "deprecations": []}
        return {
            "signatures": contract.signatures,
            "guards": contract.guards,
            "deprecations": contract.deprecations,
        }


@dataclass
class ReleaseFacts:
    """What one release says, as plain data (picklable, from a worker)."""

    names: dict[str, str]
    kinds: dict[str, str]
    contracts: dict[str, dict[str, Any]]
    open: set[str]


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def merge(
    library: str, versions: list[str], tables: list[ReleaseFacts], wheels: list[Release]
) -> dict[str, Any]:
    """One table over all releases: each fact with the bit mask of its releases."""
    names: dict[str, dict[str, int]] = {}
    kinds: dict[str, str] = {}
    open_modules: dict[str, int] = {}
    signatures: dict[str, dict[str, int]] = {}
    guards: dict[str, dict[str, int]] = {}
    deprecations: dict[str, dict[str, int]] = {}
    for bit, table in enumerate(tables):
        for name, key in table.names.items():
            targets = names.setdefault(name, {})
            targets[key] = targets.get(key, 0) | 1 << bit
        for module in table.open:
            open_modules[module] = open_modules.get(module, 0) | 1 << bit
        for key, kind in table.kinds.items():
            kinds.setdefault(key, kind if kind != LAZY else "lazy")
        for key, contract in table.contracts.items():
            _add_masked(signatures.setdefault(key, {}), [_key(contract["signatures"])], bit)
            _add_masked(
                guards.setdefault(key, {}), [_key(item) for item in contract["guards"]], bit
            )
            _add_masked(
                deprecations.setdefault(key, {}),
                [_key(item) for item in contract["deprecations"]],
                bit,
            )
    definitions: dict[str, Any] = {}
    referenced = {key for targets in names.values() for key in targets if key}
    for key in sorted(referenced):
        record: dict[str, Any] = {"kind": kinds.get(key, "value")}
        if signatures.get(key):
            record["signatures"] = [
                [mask, json.loads(text)] for text, mask in signatures[key].items()
            ]
        if guards.get(key):
            record["guards"] = [[mask, json.loads(text)] for text, mask in guards[key].items()]
        if deprecations.get(key):
            record["deprecations"] = [
                [mask, json.loads(text)] for text, mask in deprecations[key].items()
            ]
        definitions[key] = record
    return {
        "library": library,
        "releases": versions,
        "wheels": [f"{wheel.filename} sha256:{wheel.sha256}" for wheel in wheels],
        "names": {
            name: [[mask, key] for key, mask in sorted(targets.items())]
            for name, targets in sorted(names.items())
        },
        "open": open_modules,
        "definitions": definitions,
    }


def _add_masked(found: dict[str, int], keys: Iterable[str], bit: int) -> None:
    for key in keys:
        found[key] = found.get(key, 0) | 1 << bit


def read_release(
    path: Path, top: str, excluded: tuple[str, ...]
) -> tuple[ReleaseFacts, list[Site]]:
    """One wheel's table (run in a worker process: a release takes a minute),
    kept beside the wheel, keyed by the generator's own sources."""
    stored = path.with_name(f"{path.name}.{_generator_digest()}.json")
    if stored.exists():
        data = json.loads(stored.read_text())
        facts = ReleaseFacts(data["names"], data["kinds"], data["contracts"], set(data["open"]))
        return facts, [Site(**site) for site in data["sites"]]
    table = ReleaseTable(Namespace(source_files(path, top)), top, excluded)
    facts = ReleaseFacts(table.names, table.kinds, table.contracts, table.open)
    record = {
        "names": facts.names,
        "kinds": facts.kinds,
        "contracts": facts.contracts,
        "open": sorted(facts.open),
        "sites": [site.__dict__ for site in table.reader.sites],
    }
    stored.write_text(json.dumps(record))
    return facts, table.reader.sites


def _generator_digest() -> str:
    """What a release's table depends on: the reading code, not the download."""
    digest = hashlib.sha256()
    for name in ("namespace.py", "extract.py"):
        digest.update((Path(__file__).parent / "contracts" / name).read_bytes())
    digest.update(inspect.getsource(ReleaseTable).encode())
    digest.update(inspect.getsource(public_modules).encode())
    return digest.hexdigest()[:12]


def build(
    library: str, cache: Path, first: str | None, last: str | None, jobs: int
) -> tuple[dict[str, Any], list[Site]]:
    top, default_first, excluded = LIBRARIES[library]
    wheels = releases(library, first or default_first, last)
    paths = [download(wheel, cache) for wheel in wheels]
    torch_versions = [built_for(wheel, cache) if library != "torch" else None for wheel in wheels]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(read_release, paths, [top] * len(paths), [excluded] * len(paths)))
    for wheel, (facts, _) in zip(wheels, results, strict=True):
        counts = f"{len(facts.names)} names, {len(facts.contracts)} callables"
        print(f"{library} {wheel.version}: {counts}", file=sys.stderr)
    merged = merge(
        library, [wheel.minor for wheel in wheels], [facts for facts, _ in results], wheels
    )
    if library != "torch":
        merged["torch"] = torch_versions
    return merged, results[-1][1] if results else []


def write_database(path: Path, tables: list[dict[str, Any]]) -> None:
    """One SQLite file for every library: review looks a name up without
    reading the rest (a JSON of every release would take 0.1 s to load)."""
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    database = sqlite3.connect(partial)
    database.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE names (name TEXT PRIMARY KEY, targets TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE definitions (key TEXT PRIMARY KEY, record BLOB NOT NULL) WITHOUT ROWID;
        """
    )
    for table in tables:
        library = table["library"]
        for key in ("releases", "wheels", "open", "torch"):
            if key not in table:
                continue
            database.execute(
                "INSERT INTO meta VALUES (?, ?)", (f"{library}.{key}", _compact(table[key]))
            )
        database.executemany(
            "INSERT INTO names VALUES (?, ?)",
            ((name, _compact(targets)) for name, targets in sorted(table["names"].items())),
        )
        database.executemany(
            "INSERT INTO definitions VALUES (?, ?)",
            (
                (key, zlib.compress(_compact(record).encode(), 9))
                for key, record in sorted(table["definitions"].items())
            ),
        )
    database.commit()
    database.execute("VACUUM")
    database.close()
    partial.replace(path)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("libraries", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "torchwise-wheels")
    parser.add_argument("--first", help="the first minor release (default: the library's)")
    parser.add_argument("--last", help="the last minor release (default: the newest)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="releases read at once"
    )
    parser.add_argument("--out", type=Path, default=DATA / "contracts.sqlite")
    parser.add_argument(
        "--sites", type=Path, help="write the newest torch release's raise/warn sites here (JSON)"
    )
    options = parser.parse_args(argv)
    tables = []
    for library in options.libraries:
        if library not in LIBRARIES:
            parser.error(f"unknown library {library!r}; known: {', '.join(LIBRARIES)}")
        table, sites = build(library, options.cache, options.first, options.last, options.jobs)
        tables.append(table)
        if options.sites is not None and library == "torch":
            options.sites.write_text(json.dumps([site.__dict__ for site in sites], indent=0))
    options.out.parent.mkdir(parents=True, exist_ok=True)
    write_database(options.out, tables)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
