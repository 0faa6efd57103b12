"""A release's namespace, read from its sources: what ``torch.nn.LSTM`` is.

Each module's top-level bindings are collected from its syntax tree (inside
``if``/``try``/``with`` blocks too, as both sides of a version check may
bind): definitions, classes, imports, star imports, assignments and
``__all__``. A dotted name is then resolved the way Python's attribute access
would: a submodule, else a binding of the module, followed through imports and
aliases to the definition it ends at.

torch fills its top-level namespace in a loop (``for name in
dir(_C._VariableFunctions): globals()[name] = ...``); such a loop over
``dir(X)`` counts as a star import of ``X``, underscored names included. A
module with a module-level ``__getattr__`` answers names it does not bind; the
string constants that ``__getattr__`` tests (``if name in _lazy_modules``)
are read as names, and a ``__getattr__`` that tests none leaves the module
open: a name it lacks is unknown, not missing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from contracts.sources import SourceFile

#: Binding kinds.
DEF = "def"
CLASS = "class"
IMPORT = "import"  # from module import name
MODULE = "module"  # import module (as name)
ALIAS = "alias"  # name = other.name
VALUE = "value"  # anything else: a constant, an object
LAZY = "lazy"  # answered by the module's __getattr__


@dataclass
class Binding:
    kind: str
    node: ast.AST | None = None  # the def or class, or the alias's expression
    target: str | None = None  # module (IMPORT, MODULE) the name comes from
    name: str | None = None  # the name in that module (IMPORT)
    overloads: list[ast.FunctionDef] = field(default_factory=list)  # @overload stubs


@dataclass
class Module:
    name: str
    package: bool
    tree: ast.Module
    stub: bool
    bindings: dict[str, Binding] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # modules star-imported, in order
    all: list[str] | None = None
    #: Star imports made by a loop over ``dir(X)``: underscored names come too.
    dir_stars: set[str] = field(default_factory=set)
    #: A __getattr__ that answers names it does not list: nothing is missing here.
    open: bool = False


@dataclass(frozen=True)
class Target:
    """What a dotted name resolves to."""

    kind: str  # DEF, CLASS, MODULE, VALUE, LAZY
    module: str  # the module that defines it
    qualname: str  # its name there ("LSTM", "Optimizer.zero_grad"); "" for a module
    node: ast.AST | None = None
    overloads: tuple[ast.FunctionDef, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.module}.{self.qualname}" if self.qualname else self.module


class Namespace:
    """The modules of one release of one package, and name resolution over them."""

    def __init__(self, files: list[SourceFile]) -> None:
        self.modules: dict[str, Module] = {}
        stubs: dict[str, SourceFile] = {}
        for source in files:
            if source.stub:
                stubs[source.module] = source
                continue
            self._add(source)
        for name, source in stubs.items():
            if name not in self.modules:
                self._add(source)
            else:
                self._merge_stub(self.modules[name], source)

    def _add(self, source: SourceFile) -> None:
        try:
            tree = ast.parse(source.text)
        except SyntaxError:
            return  # a file the release ships but never imports (templates, py2 leftovers)
        module = Module(source.module, source.package, tree, source.stub)
        _collect(module, tree.body)
        self.modules[source.module] = module

    def _merge_stub(self, module: Module, source: SourceFile) -> None:
        """Names only the stub declares (natives a module assigns at import time)."""
        try:
            tree = ast.parse(source.text)
        except SyntaxError:
            return
        stub = Module(source.module, source.package, tree, True)
        _collect(stub, tree.body)
        for name, binding in stub.bindings.items():
            module.bindings.setdefault(name, binding)

    # -- resolution -------------------------------------------------------
    def resolve(self, dotted: str) -> Target | None:
        parts = dotted.split(".")
        if parts[0] not in self.modules:
            return None
        current = Target(MODULE, parts[0], "")
        for part in parts[1:]:
            found = self.attribute(current, part, set())
            if found is None:
                return None
            current = found
        return current

    def attribute(self, owner: Target, name: str, seen: set[str]) -> Target | None:
        """``owner.name``: a submodule, a binding, or a class member."""
        if owner.kind == MODULE:
            return self.member(owner.module, name, seen)
        if owner.kind == CLASS and isinstance(owner.node, ast.ClassDef):
            return self.class_member(owner, name, set())
        return None

    def member(self, module_name: str, name: str, seen: set[str]) -> Target | None:
        key = f"{module_name}:{name}"
        if key in seen:
            return None
        seen = seen | {key}
        module = self.modules.get(module_name)
        if module is None:
            return None
        binding = module.bindings.get(name)
        if binding is not None:
            resolved = self._binding(module, name, binding, seen)
            if resolved is not None:
                return resolved
        submodule = f"{module_name}.{name}"
        if submodule in self.modules:
            return Target(MODULE, submodule, "")
        for star in reversed(module.stars):
            if name.startswith("__"):
                break
            exporter = self.modules.get(star)
            if exporter is None:
                continue
            if exporter.all is not None and name not in exporter.all:
                continue
            if exporter.all is None and name.startswith("_") and star not in module.dir_stars:
                continue  # `from m import *` leaves underscored names behind
            found = self.member(star, name, seen)
            if found is not None:
                return found
        return None

    def _binding(
        self, module: Module, name: str, binding: Binding, seen: set[str]
    ) -> Target | None:
        if binding.kind == DEF:
            return Target(DEF, module.name, name, binding.node, tuple(binding.overloads))
        if binding.kind == CLASS:
            return Target(CLASS, module.name, name, binding.node)
        if binding.kind == MODULE and binding.target is not None:
            if binding.target in self.modules:
                return Target(MODULE, binding.target, "")
            return None
        if binding.kind == IMPORT and binding.target is not None and binding.name is not None:
            found = self.member(binding.target, binding.name, seen)
            if found is None and self._outside(binding.target):
                return Target(VALUE, module.name, name)  # from another package: it is there
            return found
        if binding.kind == ALIAS and binding.node is not None:
            # `pad = _add_docstr(torch._C._nn.pad, ...)`: the name is bound even when
            # the stub does not declare what it aliases.
            return self.expression(module, binding.node, seen) or Target(VALUE, module.name, name)
        if binding.kind == LAZY:
            submodule = f"{module.name}.{name}"
            if submodule in self.modules:
                return Target(MODULE, submodule, "")
            return Target(LAZY, module.name, name)
        return Target(VALUE, module.name, name)

    def _outside(self, module_name: str) -> bool:
        """A module of another package (``typing``, ``numpy``): never in the table."""
        return module_name.split(".")[0] not in {name.split(".")[0] for name in self.modules}

    def expression(self, module: Module, node: ast.AST, seen: set[str]) -> Target | None:
        """What a dotted expression written in ``module`` refers to."""
        if isinstance(node, ast.Name):
            return self.member(module.name, node.id, seen)
        if isinstance(node, ast.Attribute):
            base = self.expression(module, node.value, seen)
            if base is None and isinstance(node.value, ast.Name):
                # `_C._nn` where `_C` is only imported by the package's parent
                base = self._absolute(node.value.id)
            return None if base is None else self.attribute(base, node.attr, seen)
        return None

    def _absolute(self, name: str) -> Target | None:
        for candidate in self.modules:
            if candidate.rsplit(".", 1)[-1] == name and candidate.count(".") == 1:
                return Target(MODULE, candidate, "")
        return None

    def class_member(self, owner: Target, name: str, seen: set[str]) -> Target | None:
        """A method or attribute of a class, its bases' included."""
        if owner.key in seen or not isinstance(owner.node, ast.ClassDef):
            return None
        seen.add(owner.key)
        overloads: list[ast.FunctionDef] = []
        found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        for statement in _flatten(owner.node.body):
            if (
                isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
                and statement.name == name
            ):
                if _is_overload(statement) and isinstance(statement, ast.FunctionDef):
                    overloads.append(statement)
                else:
                    found = statement
            elif _binds(statement, name):
                return Target(VALUE, owner.module, f"{owner.qualname}.{name}")
        if found is not None or overloads:
            return Target(DEF, owner.module, f"{owner.qualname}.{name}", found, tuple(overloads))
        for base in self.bases(owner):
            member = self.class_member(base, name, seen)
            if member is not None:
                return member
        return None

    def bases(self, owner: Target) -> Iterator[Target]:
        if not isinstance(owner.node, ast.ClassDef):
            return
        module = self.modules.get(owner.module)
        if module is None:
            return
        for base in owner.node.bases:
            if isinstance(base, ast.Subscript):
                base = base.value  # Generic[T], nn.Module subclasses written as Base[T]
            target = self.expression(module, base, set())
            if target is not None and target.kind == CLASS:
                yield target

    # -- enumeration ------------------------------------------------------
    def names(self, module_name: str) -> set[str]:
        """The names ``module`` answers, dunders left out."""
        found: set[str] = set()
        self._names(module_name, found, set(), underscored=True)
        found.update(
            child.rsplit(".", 1)[1]
            for child in self.modules
            if child.rsplit(".", 1)[0] == module_name and "." in child
        )
        return {name for name in found if not name.startswith("__")}

    def _names(self, module_name: str, found: set[str], seen: set[str], underscored: bool) -> None:
        if module_name in seen:
            return
        seen.add(module_name)
        module = self.modules.get(module_name)
        if module is None:
            return
        found.update(name for name in module.bindings if underscored or not name.startswith("_"))
        for star in module.stars:
            exporter = self.modules.get(star)
            if exporter is None:
                continue
            if exporter.all is not None:
                found.update(exporter.all)
                continue
            inner: set[str] = set()
            self._names(star, inner, set(seen), underscored=star in module.dir_stars)
            found.update(inner)


def _is_overload(node: ast.AST) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any(
        (isinstance(item, ast.Name) and item.id == "overload")
        or (isinstance(item, ast.Attribute) and item.attr == "overload")
        for item in decorators
    )


def _binds(statement: ast.stmt, name: str) -> bool:
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign):
        targets = [statement.target]
    return any(isinstance(target, ast.Name) and target.id == name for target in targets)


def _flatten(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a block, descending into if/try/with (both sides of a check)."""
    for statement in body:
        if isinstance(statement, ast.If):
            yield from _flatten(statement.body)
            yield from _flatten(statement.orelse)
        elif isinstance(statement, ast.Try):
            yield from _flatten(statement.body)
            for handler in statement.handlers:
                yield from _flatten(handler.body)
            yield from _flatten(statement.orelse)
            yield from _flatten(statement.finalbody)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            yield from _flatten(statement.body)
        else:
            yield statement


def _relative(module: Module, level: int, target: str | None) -> str:
    base = module.name if module.package else module.name.rpartition(".")[0]
    for _ in range(level - 1):
        base = base.rpartition(".")[0]
    if target:
        return f"{base}.{target}" if base else target
    return base


def _collect(module: Module, body: list[ast.stmt]) -> None:
    for statement in _flatten(body):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _collect_def(module, statement)
        elif isinstance(statement, ast.ClassDef):
            module.bindings[statement.name] = Binding(CLASS, statement)
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    module.bindings[alias.asname] = Binding(MODULE, target=alias.name)
                else:
                    top = alias.name.split(".")[0]
                    module.bindings.setdefault(top, Binding(MODULE, target=top))
        elif isinstance(statement, ast.ImportFrom):
            _collect_from(module, statement)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            _collect_assign(module, statement)
        elif isinstance(statement, ast.Expr):
            _collect_all_call(module, statement.value)
        elif isinstance(statement, ast.For):
            _collect_dir_loop(module, statement)


def _collect_def(module: Module, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    if node.name == "__getattr__":
        names = _getattr_names(module, node)
        if names is None:
            module.open = True
        else:
            for name in names:
                module.bindings.setdefault(name, Binding(LAZY))
        return
    existing = module.bindings.get(node.name)
    if _is_overload(node) and isinstance(node, ast.FunctionDef):
        if existing is None or existing.kind != DEF:
            existing = module.bindings[node.name] = Binding(DEF, None)
        existing.overloads.append(node)
        return
    if existing is not None and existing.kind == DEF and existing.node is None:
        existing.node = node  # the implementation after its @overload stubs
        return
    module.bindings[node.name] = Binding(DEF, node)


def _getattr_names(module: Module, node: ast.AST) -> set[str] | None:
    """The names a module's ``__getattr__`` answers, if it tests them by name."""
    tested: set[str] = set()
    containers: set[str] = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Compare):
            for comparator in inner.comparators:
                if isinstance(comparator, ast.Constant) and isinstance(comparator.value, str):
                    tested.add(comparator.value)
                elif isinstance(comparator, (ast.Set, ast.List, ast.Tuple)):
                    tested.update(_strings(comparator))
                elif isinstance(comparator, ast.Name):
                    containers.add(comparator.id)
        elif (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr == "get"
            and isinstance(inner.func.value, ast.Name)
        ):
            containers.add(inner.func.value.id)
    for statement in _flatten(module.tree.body):
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if any(isinstance(target, ast.Name) and target.id in containers for target in targets):
                tested.update(_strings(statement.value))
    if not tested:
        return None
    return {name for name in tested if name.isidentifier()}


def _strings(node: ast.AST) -> set[str]:
    """String constants of a literal container (a dict's keys), through calls
    such as ``frozenset({...})``."""
    found: set[str] = set()
    if isinstance(node, ast.Call):
        for argument in node.args:
            found |= _strings(argument)
    elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        for item in node.elts:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                found.add(item.value)
    elif isinstance(node, ast.Dict):
        for key in node.keys:
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
    return found


def _collect_from(module: Module, statement: ast.ImportFrom) -> None:
    source = (
        _relative(module, statement.level, statement.module)
        if statement.level
        else statement.module
    )
    if source is None:
        return
    for alias in statement.names:
        if alias.name == "*":
            module.stars.append(source)
            continue
        local = alias.asname or alias.name
        module.bindings[local] = Binding(IMPORT, target=source, name=alias.name)


def _collect_assign(module: Module, statement: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
    targets: list[ast.expr]
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    else:
        targets = [statement.target]
    value = statement.value
    for target in targets:
        if not isinstance(target, ast.Name):
            if isinstance(target, ast.Tuple):
                for element in target.elts:
                    if isinstance(element, ast.Name):
                        module.bindings[element.id] = Binding(VALUE)
            continue
        if target.id == "__all__":
            _collect_all(module, statement)
            continue
        if isinstance(statement, ast.AugAssign):
            continue
        module.bindings[target.id] = _assigned(value)


def _assigned(value: ast.expr | None) -> Binding:
    """``f = other.f`` and ``f = _add_docstr(torch.f, ...)`` are aliases."""
    if isinstance(value, (ast.Name, ast.Attribute)):
        return Binding(ALIAS, value)
    if (
        isinstance(value, ast.Call)
        and value.args
        and isinstance(value.func, (ast.Name, ast.Attribute))
        and _called_name(value.func) in _ALIASING_CALLS
        and isinstance(value.args[0], (ast.Name, ast.Attribute))
    ):
        return Binding(ALIAS, value.args[0])
    return Binding(VALUE)


#: Calls that return their first argument with a docstring or a dispatcher added.
_ALIASING_CALLS = frozenset({"_add_docstr", "add_docstr", "_copy_to_script_wrapper"})


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _collect_all(module: Module, statement: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
    names = _string_list(statement.value, module)
    if names is None:
        module.all = None if not isinstance(statement, ast.AugAssign) else module.all
        return
    if isinstance(statement, ast.AugAssign) and module.all is not None:
        module.all = module.all + names
    elif not isinstance(statement, ast.AugAssign):
        module.all = names


def _string_list(node: ast.expr | None, module: Module) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        strings = [
            item.value
            for item in node.elts
            if isinstance(item, ast.Constant) and isinstance(item.value, str)
        ]
        return strings if len(strings) == len(node.elts) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_list(node.left, module), _string_list(node.right, module)
        if left is None or right is None:
            return None
        return left + right
    return None


def _collect_all_call(module: Module, value: ast.expr) -> None:
    """``__all__.extend([...])`` and ``__all__.append("x")``."""
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == "__all__"
        and module.all is not None
        and value.args
    ):
        return
    if value.func.attr == "append" and isinstance(value.args[0], ast.Constant):
        module.all = [*module.all, str(value.args[0].value)]
    elif value.func.attr in ("extend", "__iadd__"):
        names = _string_list(value.args[0], module)
        module.all = None if names is None else module.all + names


def _collect_dir_loop(module: Module, loop: ast.For) -> None:
    """``for name in dir(X): ... globals()[name] = ...`` re-exports all of X."""
    iterated = loop.iter
    if not (
        isinstance(iterated, ast.Call)
        and isinstance(iterated.func, ast.Name)
        and iterated.func.id == "dir"
        and iterated.args
    ):
        return
    writes_globals = any(
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "globals"
        for node in ast.walk(loop)
    )
    if not writes_globals:
        return
    source = _dotted(iterated.args[0])
    if source is None:
        return
    first, _, rest = source.partition(".")
    binding = module.bindings.get(first)
    if binding is not None and binding.kind == MODULE and binding.target:
        base = binding.target
    elif binding is not None and binding.kind == IMPORT and binding.target and binding.name:
        base = f"{binding.target}.{binding.name}"
    else:
        base = f"{module.name}.{first}"
    full = f"{base}.{rest}" if rest else base
    module.stars.append(full)
    module.dir_stars.add(full)
    if module.all is not None:
        module.all = None  # it appends the names it copies: every public one


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
