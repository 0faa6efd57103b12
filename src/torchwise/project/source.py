"""What one parse of a Python file tells about a project, without running it.

For each file: the packages it imports, its classes (bases resolved through the
file's imports, so ``nn.Module``, ``torch.nn.Module`` and ``from torch.nn import
Module`` all read ``torch.nn.Module``), what their ``__init__`` and ``forward``
require, its module-level factories, whether it trains, and whether importing
it would run more than definitions (a script that trains at import time must
not be imported to find its model).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

#: Top-level calls that are harmless at import time (seeding, logging, warnings, paths).
_HARMLESS_CALL = re.compile(
    r"^(warnings|logging|sys\.path|os\.environ|torch\.(manual_seed|set_\w+|backends\.|_dynamo"
    r"|cuda\.manual_seed|use_deterministic_algorithms|autograd\.set_detect_anomaly)"
    r"|np\.random\.seed|numpy\.random\.seed|random\.seed|matplotlib\.use|plt\.switch_backend"
    r"|print|__all__\.|\w+\.register\w*|\w+\.update|\w+\.append|\w+\.extend|load_dotenv)"
)
#: Calls that do real work (I/O, training, downloads) even on the right of an assignment.
_WORK_CALL = re.compile(
    r"(^|\.)(load|download\w*|urlretrieve|urlopen|fit|train|run|main|from_pretrained|read_csv"
    r"|imread|load_dataset|parse_args|input|sleep)$"
)


@dataclass
class ClassFacts:
    name: str
    line: int
    bases: list[str]  # dotted, resolved through the file's imports where possible
    init_required: list[str] | None  # None: the class defines no __init__
    init_annotations: dict[str, str]  # required parameter -> the annotation's last name
    forward_required: int | None  # required positional inputs of its own forward
    is_dataclass: bool
    all_defaults: bool  # constructible without arguments (dataclass fields or __init__)
    references: set[str]  # names and dotted names used in its body, resolved by imports


@dataclass
class FunctionFacts:
    name: str
    line: int
    required: list[str]
    returns: set[str]  # names of the classes it calls in its return statements
    #: names passed to the calls it returns: ``PreActResNet(PreActBlock, [2, 2])``
    #: makes PreActBlock a part of the model the factory builds
    passes: set[str] = field(default_factory=set)


@dataclass
class FileFacts:
    path: str
    lines: int
    imports: dict[str, int] = field(default_factory=dict)  # top-level package -> first line
    #: every module imported, dotted (``torch.utils.tensorboard``; ``from a.b import c``
    #: gives ``a.b`` and ``a.b.c``), for dependencies a package brings only through one
    modules: set[str] = field(default_factory=set)
    #: calls that give built instances to a constructor, with what each argument carries
    #: (:func:`_assembled`): how builders and notebooks assemble a model from its parts
    assembled: list[tuple[str, tuple[Carried, ...]]] = field(default_factory=list)
    classes: list[ClassFacts] = field(default_factory=list)
    functions: list[FunctionFacts] = field(default_factory=list)
    imported: set[str] = field(default_factory=set)  # the names its imports bind
    import_risk: str | None = None  # why importing it would run more than definitions
    trains: bool = False
    downloads: bool = False  # fetches or unpacks data (a dataset preparation script)
    parse_error: str | None = None


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Subscript):  # Generic[T], nn.ModuleList[...]: the subscripted name
        return _dotted(node.value)
    return None  # a call (six.with_metaclass(...)), a literal: no name to resolve


def _import_map(nodes: list[ast.AST]) -> tuple[dict[str, str], dict[str, int], set[str]]:
    """Local alias -> dotted origin, top-level package -> first import line, and every
    dotted module imported (absolute imports only)."""
    aliases: dict[str, str] = {}
    packages: dict[str, int] = {}
    modules: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
                packages.setdefault(alias.name.split(".")[0], node.lineno)
                modules.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and module:
                packages.setdefault(module.split(".")[0], node.lineno)
                modules.add(module)
                modules.update(f"{module}.{alias.name}" for alias in node.names)
            for alias in node.names:
                origin = f"{module}.{alias.name}" if module else alias.name
                aliases[alias.asname or alias.name] = origin if node.level == 0 else alias.name
    return aliases, packages, modules


def resolve(name: str, aliases: dict[str, str]) -> str:
    head, _, rest = name.partition(".")
    origin = aliases.get(head)
    if origin is None:
        return name
    return f"{origin}.{rest}" if rest else origin


def _required(args: ast.arguments, *, skip_first: bool) -> list[str]:
    positional = [*args.posonlyargs, *args.args]
    if skip_first and positional:
        positional = positional[1:]
    without_default = positional[: len(positional) - len(args.defaults)]
    required = [a.arg for a in without_default]
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]
    return required


def _annotation_name(node: ast.expr | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(".")[-1].strip("'\" ")
    dotted = _dotted(node)
    return dotted.split(".")[-1] if dotted else None


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        dotted = _dotted(target)
        if dotted and dotted.split(".")[-1] == "dataclass":
            return True
    return False


def _class_facts(node: ast.ClassDef, aliases: dict[str, str], nodes: list[ast.AST]) -> ClassFacts:
    bases = [resolve(d, aliases) for base in node.bases if (d := _dotted(base))]
    init: ast.FunctionDef | None = None
    forward: ast.FunctionDef | None = None
    fields_default = True
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            init = item
        elif isinstance(item, ast.FunctionDef) and item.name == "forward":
            forward = item
        elif isinstance(item, ast.AnnAssign) and item.value is None:
            annotation = _annotation_name(item.annotation) or ""
            if annotation != "ClassVar":
                fields_default = False
    init_required = _required(init.args, skip_first=True) if init else None
    annotations: dict[str, str] = {}
    if init is not None:
        for arg in [*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs]:
            name = _annotation_name(arg.annotation)
            if name and init_required and arg.arg in init_required:
                annotations[arg.arg] = name
    forward_required = None
    if forward is not None:
        forward_required = len(
            [a for a in _required(forward.args, skip_first=True) if a not in _kwonly(forward)]
        )
    is_dataclass = _is_dataclass(node)
    if init is not None:
        all_defaults = not init_required
    else:
        all_defaults = fields_default if is_dataclass else True
    # Resolved through the file's imports: `nn.Transformer` is torch.nn.Transformer, not
    # the project's own Transformer class in another file.
    references = set()
    for child in nodes:
        if isinstance(child, ast.Name):
            references.add(resolve(child.id, aliases))
        elif isinstance(child, ast.Attribute) and (dotted := _dotted(child)):
            references.add(resolve(dotted, aliases))
    references.discard(node.name)
    return ClassFacts(
        node.name, node.lineno, bases, init_required, annotations, forward_required,
        is_dataclass, all_defaults, references,
    )  # fmt: skip


def _kwonly(function: ast.FunctionDef) -> set[str]:
    return {a.arg for a in function.args.kwonlyargs}


def _function_facts(
    node: ast.FunctionDef, nodes: list[ast.AST], aliases: dict[str, str]
) -> FunctionFacts:
    returns: set[str] = set()
    assigned: dict[str, str] = {}
    passes: set[str] = set()
    for child in nodes:
        if isinstance(child, ast.Call):
            for argument in [*child.args, *(k.value for k in child.keywords)]:
                if isinstance(argument, ast.Name):
                    passes.add(resolve(argument.id, aliases))
        if isinstance(child, ast.Assign) and isinstance(child.value, ast.Call):
            callee = _dotted(child.value.func)
            for target in child.targets:
                if isinstance(target, ast.Name) and callee:
                    assigned[target.id] = callee.split(".")[-1]
        if isinstance(child, ast.Return) and child.value is not None:
            value = child.value
            if isinstance(value, ast.Tuple) and value.elts:
                value = value.elts[0]  # (model, example_inputs)
            if isinstance(value, ast.Call) and (callee := _dotted(value.func)):
                returns.add(callee.split(".")[-1])
            elif isinstance(value, ast.Name) and value.id in assigned:
                returns.add(assigned[value.id])
    return FunctionFacts(
        node.name, node.lineno, _required(node.args, skip_first=False), returns, passes - returns
    )


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one scope (a module or a function), without nested definitions."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


#: What one argument of a constructor call carries: the classes built into it, and
#: whether it is a collection of them (a list, ``nn.ModuleList``, a variable appended to).
Carried = tuple[frozenset[str], bool]

_COLLECTIONS = (ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.GeneratorExp, ast.Dict, ast.Starred)
_CONTAINERS = frozenset({"ModuleList", "Sequential", "ModuleDict", "list", "tuple", "dict"})


@dataclass
class _Scope:
    """What the variables of one scope hold: the classes built into them."""

    aliases: dict[str, str]
    held: dict[str, set[str]] = field(default_factory=dict)
    collected: set[str] = field(default_factory=set)  # variables that hold several

    def built(self, expression: ast.AST) -> set[str]:
        names: set[str] = set()
        for child in ast.walk(expression):
            if isinstance(child, ast.Call) and (callee := _dotted(child.func)):
                names.add(resolve(callee, self.aliases).rpartition(".")[2])
            elif isinstance(child, ast.Name):
                names |= self.held.get(child.id, set())
        return names

    def is_collection(self, expression: ast.AST) -> bool:
        if isinstance(expression, _COLLECTIONS):
            return True
        if isinstance(expression, ast.Name):
            return expression.id in self.collected
        if isinstance(expression, ast.Call) and (callee := _dotted(expression.func)):
            return callee.rpartition(".")[2] in _CONTAINERS
        return False

    def hold(self, name: str, expression: ast.AST, *, many: bool = False) -> None:
        self.held[name] = self.held.get(name, set()) | self.built(expression)
        if many or self.is_collection(expression):
            self.collected.add(name)

    def follow(self, node: ast.AST) -> None:
        """Record what an assignment or an ``.append`` puts into a variable."""
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.hold(target.id, node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            self.hold(node.target.id, node.value, many=True)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend", "insert")
            and isinstance(node.func.value, ast.Name)
        ):
            for argument in node.args:
                self.hold(node.func.value.id, argument, many=True)


def _assembled(tree: ast.Module, aliases: dict[str, str]) -> list[tuple[str, tuple[Carried, ...]]]:
    """Each constructor-like call with what its arguments carry, per scope (a function or
    the module's top level), following variables and ``.append``: a builder's
    ``Encoder(d, nn.ModuleList(blocks))`` or a notebook's ``Seq2Seq(enc, dec)``."""
    calls: list[tuple[str, tuple[Carried, ...]]] = []
    scopes: list[ast.AST] = [tree]
    scopes += [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope_node in scopes:
        nodes = list(_scope_nodes(scope_node))
        scope = _Scope(aliases)
        for _ in range(3):  # variables built from variables: a few rounds reach a fixed point
            for node in nodes:
                scope.follow(node)
        for node in nodes:
            if isinstance(node, ast.Call) and (callee := _dotted(node.func)):
                whole = resolve(callee, aliases).rpartition(".")[2]
                carried = tuple(
                    (frozenset(scope.built(argument) - {whole}), scope.is_collection(argument))
                    for argument in [*node.args, *(k.value for k in node.keywords)]
                )
                if any(parts for parts, _ in carried):
                    calls.append((whole, carried))
    return calls


def _is_main_guard(node: ast.If) -> bool:
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )


def _call_names(node: ast.AST) -> list[tuple[str, ast.Call]]:
    return [
        (dotted, child)
        for child in ast.walk(node)
        if isinstance(child, ast.Call) and (dotted := _dotted(child.func))
    ]


def _risk(body: list[ast.stmt]) -> str | None:
    """Why importing a module with this top-level ``body`` would do real work, or None."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, (ast.ClassDef, ast.Pass, ast.Global)):
            continue
        if isinstance(node, ast.If):
            if _is_main_guard(node):
                continue
            reason = _risk(node.body) or _risk(node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            reason = _risk(node.body) or _risk(handlers) or _risk(node.orelse)
            reason = reason or _risk(node.finalbody)
        elif isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant):
                continue
            calls = _call_names(node.value)
            bad = [name for name, _ in calls if not _HARMLESS_CALL.match(name)]
            reason = f"line {node.lineno} calls {bad[0]}()" if bad else None
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            reason = None
            for name, call in _call_names(node):
                downloads = any(
                    k.arg == "download" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in call.keywords
                )
                if downloads or _WORK_CALL.search(name):
                    reason = f"line {node.lineno} calls {name}()"
                    break
        elif isinstance(node, (ast.For, ast.While, ast.AsyncFor, ast.With, ast.AsyncWith)):
            reason = f"line {node.lineno} runs a top-level {type(node).__name__.lower()} block"
        else:
            continue  # assert, delete, type aliases: no work
        if reason:
            return reason
    return None


#: Calls that fetch or unpack data: a script making them prepares a dataset.
_DOWNLOADS = re.compile(
    r"(^|\.)(download\w*|urlretrieve|urlopen|extractall|unpack_archive|load_dataset)$"
    r"|^(wget|gdown|requests)\.(download|get)$"
)


def _downloads(nodes: list[ast.AST]) -> bool:
    return any(
        isinstance(child, ast.Call)
        and (name := _dotted(child.func)) is not None
        and _DOWNLOADS.search(name) is not None
        for child in nodes
    )


def _trains(nodes: list[ast.AST]) -> bool:
    attributes = {
        child.func.attr
        for child in nodes
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
    }
    return ("backward" in attributes and "step" in attributes) or "fit" in attributes


def analyse(source: str, path: str) -> FileFacts:
    """The facts of one file (a file that does not parse yields only its line count)."""
    facts = FileFacts(path, source.count("\n") + 1)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        facts.parse_error = f"{type(exc).__name__}: {getattr(exc, 'msg', exc)}"
        return facts
    # One walk over the tree: each top-level statement's nodes, reused by every fact.
    per_statement = [(statement, list(ast.walk(statement))) for statement in tree.body]
    every = [node for _, nodes in per_statement for node in nodes]
    aliases, facts.imports, facts.modules = _import_map(every)
    facts.imported = set(aliases)
    for statement, nodes in per_statement:
        if isinstance(statement, ast.ClassDef):
            facts.classes.append(_class_facts(statement, aliases, nodes))
        elif isinstance(statement, ast.FunctionDef):
            facts.functions.append(_function_facts(statement, nodes, aliases))
    facts.import_risk = _risk(tree.body)
    facts.trains = _trains(every)
    facts.downloads = _downloads(every)
    facts.assembled = _assembled(tree, aliases)
    return facts
