"""The layers of the tree, enforced: data flows commands -> capability -> core.

Read from the source (ast), never by importing it:

- no module imports another top-level package's private names (``_name``);
- a capability or a composition package uses another capability only through its
  package face (``from torchwise.doc import SymbolicShapes``, not
  ``torchwise.doc.shapes``): what a package exports in ``__init__`` is its contract,
  the rest may move; commands (the thin front end) may import deeper, lazily;
- the core never imports a capability, a composition package or the commands;
- no two packages import each other at module level (an import cycle);
- CONTRIBUTING.md's map names every top-level module and package of the tree, and
  nothing the tree does not have.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "torchwise"
CAPABILITIES = frozenset({"review", "run", "model", "doc", "doctor", "tune", "ckpt", "testgen"})
COMPOSITION = frozenset({"project", "mcp", "agents", "server"})
FRONT = frozenset({"commands", "cli", "__main__"})


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, "torchwise.doc.run"
    target: str  # the imported module, "torchwise.model"
    names: tuple[str, ...]  # names imported from it ("" for `import x`)
    top_level: bool  # at module level (not inside a function or TYPE_CHECKING)


def _modules() -> dict[str, Path]:
    found = {}
    for path in SOURCE.rglob("*.py"):
        parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    top = {id(node) for node in tree.body}
    for statement in tree.body:  # `if TYPE_CHECKING:` imports are for the type checker
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            top.difference_update(id(n) for n in ast.walk(statement))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("torchwise"):
                    yield Import(module, alias.name, ("",), id(node) in top)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.startswith("torchwise"):
                names = tuple(alias.name for alias in node.names)
                yield Import(module, target, names, id(node) in top)


def _package(module: str) -> str:
    """The top-level package or module under torchwise: "doc", "errors"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _all_imports() -> list[Import]:
    return [found for module, path in _modules().items() for found in _imports(module, path)]


def test_no_private_name_crosses_a_package() -> None:
    crossing = [
        f"{i.module} imports {i.target}.{name}"
        for i in _all_imports()
        if _package(i.module) != _package(i.target)
        for name in i.names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert crossing == []


def test_capabilities_meet_only_through_package_faces() -> None:
    reaching = sorted(
        f"{i.module} imports {i.target}"
        for i in _all_imports()
        if _package(i.module) in CAPABILITIES | COMPOSITION
        and _package(i.target) in CAPABILITIES
        and _package(i.module) != _package(i.target)
        and i.target.count(".") > 1
    )
    assert reaching == []


def test_the_core_imports_no_capability_composition_or_command() -> None:
    upward = sorted(
        f"{i.module} imports {i.target}"
        for i in _all_imports()
        if _package(i.module) not in CAPABILITIES | COMPOSITION | FRONT
        and _package(i.target) in CAPABILITIES | COMPOSITION | FRONT
    )
    assert upward == []


def test_no_two_packages_import_each_other_at_module_level() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for i in _all_imports():
        source, target = _package(i.module), _package(i.target)
        if i.top_level and source and target and source != target:
            edges[source].add(target)
    cycles = sorted(
        f"{a} <-> {b}" for a in edges for b in edges[a] if a < b and a in edges.get(b, ())
    )
    assert cycles == []


def test_contributing_maps_the_whole_tree() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("```")[1]
    mapped = set(re.findall(r"^  ([a-z_]+(?:\.py|/))", layout, flags=re.MULTILINE))
    tree = {
        f"{p.name}/" if p.is_dir() else p.name
        for p in SOURCE.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists())
        or (p.suffix == ".py" and p.name not in {"__init__.py", "__main__.py"})
    }
    assert sorted(tree - mapped) == [], "in the tree, missing from CONTRIBUTING's map"
    assert sorted(mapped - tree) == [], "in CONTRIBUTING's map, not in the tree"
