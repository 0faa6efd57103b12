"""Signatures, argument checks and deprecations of one callable, from its source.

**Signatures.** A ``def``'s parameters as written; a class's are its
``__init__``'s (found through its bases). A callable that takes ``*args,
**kwargs`` and hands them on (``LSTM.__init__`` calls
``super().__init__("LSTM", *args, **kwargs)``) has the signature of what it
hands them to, less the arguments it fills itself: that is what a call is
checked against at run time. ``@overload`` stubs are kept as the overloads.

**Checks** (guards). The statements of the body are read in order, as they
run on a call: ``if <condition>: raise X(message)``, ``assert condition,
message``, ``torch._check(condition, lambda: message)`` and ``if
<condition>: warnings.warn(message)``. A condition is kept when it reads only
the parameters and literals (through local names and ``self.x`` assigned from
them: ``self.head_dim = embed_dim // num_heads``); a check behind an ``if``
that returns adds that ``if``'s negation to every later check. The checks of
what the body calls with its parameters (``super().__init__(...)``, a
submodule built in ``__init__``) are read the same way, with the arguments put
for the callee's parameters, three calls deep. ``torch.jit.is_scripting()``
and its kin are false: a user's call runs eagerly.

**Deprecations.** A warning the body emits whatever the arguments, and the
``@deprecated(message)`` decorator of ``typing_extensions``/``warnings``.
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass, field
from typing import Any

from contracts.namespace import CLASS, DEF, Namespace, Target
from torchwise.review.contracts.guards import UNKNOWN, evaluate, referenced

Expr = Any
Function = ast.FunctionDef | ast.AsyncFunctionDef
MAX_DEPTH = 3

#: Calls that are false when user code runs eagerly.
_EAGER_FALSE = frozenset(
    {
        "is_scripting",
        "is_tracing",
        "_get_tracing_state",
        "is_compiling",
        "is_dynamo_compiling",
        "has_torch_function",
        "has_torch_function_unary",
        "has_torch_function_variadic",
        "is_torchdynamo_compiling",
    }
)
_PURE_BUILTINS = frozenset(
    {"len", "abs", "int", "float", "bool", "str", "min", "max", "callable", "round"}
)
_STRING_METHODS = frozenset({"lower", "upper", "startswith", "endswith", "strip"})
_CHECKS = {
    "_check": "RuntimeError",
    "_check_value": "ValueError",
    "_check_type": "TypeError",
    "_check_index": "IndexError",
    "_check_not_implemented": "NotImplementedError",
    "_check_with": None,  # the class is its first argument
}
_BINARY = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}
_COMPARE = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}
_DEPRECATION_CATEGORIES = ("FutureWarning", "DeprecationWarning")
#: How a block always leaves.
RAISES = "raises"
RETURNS = "returns"


@dataclass
class Site:
    """A ``raise``/``warn`` site met while reading (for the misuse catalogue)."""

    module: str
    line: int
    kind: str  # "raise", "warn", "assert", "check"
    exception: str
    message: list[Expr]
    #: The condition over the parameters, or None: it needs values a call does not show.
    when: Expr | None


@dataclass
class Contract:
    signatures: list[list[list[Any]]] = field(default_factory=list)  # overloads
    guards: list[dict[str, Any]] = field(default_factory=list)
    deprecations: list[dict[str, Any]] = field(default_factory=list)


# -- expressions --------------------------------------------------------------
@dataclass
class Env:
    """What names mean while a body is read."""

    params: set[str]
    subst: dict[str, Expr] = field(default_factory=dict)

    def child(self) -> Env:
        return Env(set(self.params), dict(self.subst))

    def forget(self, name: str) -> None:
        self.params.discard(name)
        self.subst.pop(name, None)


def convert(node: ast.AST | None, env: Env) -> Expr | None:
    """The expression tree of ``node``, or None when it reads anything but
    parameters, literals and the pure operations the evaluator knows."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return ["const", node.value]
        return None
    if isinstance(node, (ast.Name, ast.Attribute)):
        dotted = _dotted(node)
        if dotted is not None and dotted in env.subst:
            return env.subst[dotted]
        if isinstance(node, ast.Name) and node.id in env.params:
            return ["param", node.id]
        return None
    if isinstance(node, ast.UnaryOp):
        operand = convert(node.operand, env)
        if operand is None:
            return None
        if isinstance(node.op, ast.Not):
            return ["not", operand]
        if isinstance(node.op, ast.USub):
            if operand[0] == "const" and isinstance(operand[1], (int, float)):
                return ["const", -operand[1]]
            return ["neg", operand]
        if isinstance(node.op, ast.UAdd):
            return operand
        return None
    if isinstance(node, ast.BoolOp):
        values = [convert(value, env) for value in node.values]
        if any(value is None for value in values):
            return None
        return ["and" if isinstance(node.op, ast.And) else "or", values]
    if isinstance(node, ast.Compare):
        operands = [convert(item, env) for item in [node.left, *node.comparators]]
        ops = [_COMPARE.get(type(op)) for op in node.ops]
        if any(item is None for item in operands) or any(op is None for op in ops):
            return None
        return ["cmp", ops, operands]
    if isinstance(node, ast.BinOp):
        op = _BINARY.get(type(node.op))
        left, right = convert(node.left, env), convert(node.right, env)
        if op is None or left is None or right is None:
            return None
        return ["bin", op, left, right]
    if isinstance(node, ast.IfExp):
        parts = [convert(item, env) for item in (node.test, node.body, node.orelse)]
        if any(part is None for part in parts):
            return None
        return ["ifexp", *parts]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [convert(item, env) for item in node.elts]
        if any(item is None for item in items):
            return None
        kind = {ast.Tuple: "tuple", ast.List: "list", ast.Set: "set"}[type(node)]
        return [kind, items]
    if isinstance(node, ast.Call):
        return _convert_call(node, env)
    return None


def _convert_call(node: ast.Call, env: Env) -> Expr | None:
    name = _dotted(node.func) or ""
    last = name.rsplit(".", 1)[-1]
    if last in _EAGER_FALSE:
        return ["const", False]
    if node.keywords:
        return None
    if name == "isinstance" and len(node.args) == 2:
        value = convert(node.args[0], env)
        types = _type_names(node.args[1])
        if value is None or types is None:
            return None
        return ["call", "isinstance", [value, ["types", types]]]
    if name in _PURE_BUILTINS:
        arguments = [convert(item, env) for item in node.args]
        if any(item is None for item in arguments):
            return None
        return ["call", name, arguments]
    if isinstance(node.func, ast.Attribute) and node.func.attr in _STRING_METHODS:
        receiver = convert(node.func.value, env)
        arguments = [convert(item, env) for item in node.args]
        if receiver is None or any(item is None for item in arguments):
            return None
        return ["method", receiver, node.func.attr, arguments]
    return None


def _type_names(node: ast.AST) -> list[str] | None:
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    names = [_dotted(item) for item in items]
    if any(name is None for name in names):
        return None
    return [name for name in names if name is not None]


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def conjunction(conditions: list[Expr | None]) -> Expr | None:
    if any(item is None for item in conditions):
        return None
    if not conditions:
        return ["const", True]
    if len(conditions) == 1:
        return conditions[0]
    return ["and", list(conditions)]


def negation(condition: Expr | None) -> Expr | None:
    if condition is None:
        return None
    if condition[0] == "not":
        return condition[1]
    if condition[0] == "const":
        return ["const", not condition[1]]
    return ["not", condition]


# -- messages -----------------------------------------------------------------
def message(node: ast.AST | None, env: Env) -> list[Expr]:
    """A message's literal text and the expressions it formats, in order."""
    if node is None:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts: list[Expr] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                converted = convert(value.value, env)
                parts.append(converted if converted is not None else "…")
        return _merge(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _merge(message(node.left, env) + message(node.right, env))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _percent(node, env)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return _format(node.func.value.value, node, env)
    if isinstance(node, ast.Lambda):
        return message(node.body, env)
    converted = convert(node, env)
    if converted is not None:
        return [converted]
    return ["…"]


def _merge(parts: list[Expr]) -> list[Expr]:
    merged: list[Expr] = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    return merged


def _format(template: str, call: ast.Call, env: Env) -> list[Expr]:
    parts: list[Expr] = []
    automatic = 0
    keywords = {item.arg: item.value for item in call.keywords if item.arg}
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return [template]
    for literal, field_name, _spec, _conversion in fields:
        parts.append(literal)
        if field_name is None:
            continue
        source: ast.AST | None
        if field_name == "":
            source = call.args[automatic] if automatic < len(call.args) else None
            automatic += 1
        elif field_name.isdigit():
            index = int(field_name)
            source = call.args[index] if index < len(call.args) else None
        else:
            source = keywords.get(field_name)
        converted = convert(source, env)
        parts.append(converted if converted is not None else "…")
    return _merge(parts)


def _percent(node: ast.BinOp, env: Env) -> list[Expr]:
    if not (isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
        return ["…"]
    values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
    pieces = node.left.value.split("%")
    parts: list[Expr] = [pieces[0]]
    index = 0
    for piece in pieces[1:]:
        if piece.startswith("%"):
            parts.append("%" + piece[1:])
            continue
        spec_end = 0
        while spec_end < len(piece) and not piece[spec_end].isalpha():
            spec_end += 1
        source = values[index] if index < len(values) else None
        index += 1
        converted = convert(source, env)
        parts.append(converted if converted is not None else "…")
        parts.append(piece[spec_end + 1 :])
    return _merge(parts)


# -- signatures ---------------------------------------------------------------
def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> list[list[Any]]:
    """``[name, kind, default]`` for each parameter (kinds as in the model)."""
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    defaults += list(arguments.defaults)
    found: list[list[Any]] = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        kind = "p" if index < len(arguments.posonlyargs) else "a"
        found.append([arg.arg, kind, _default(default)])
    if arguments.vararg is not None:
        found.append([arguments.vararg.arg, "v", None])
    for arg, kw_default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        found.append([arg.arg, "k", _default(kw_default)])
    if arguments.kwarg is not None:
        found.append([arguments.kwarg.arg, "w", None])
    if drop_first and found and found[0][1] in ("p", "a"):
        found = found[1:]
    return found


def _default(node: ast.expr | None) -> Expr | None:
    if node is None:
        return None
    converted = convert(node, Env(set()))
    if converted is not None and converted[0] in ("const", "tuple", "list"):
        return converted
    return ["?"]


def _is_method(target: Target) -> bool:
    return "." in target.qualname


def _drops_first(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> bool:
    decorators = {_dotted(item) for item in node.decorator_list}
    if "staticmethod" in decorators:
        return False
    return method


# -- reading a callable ---------------------------------------------------------
class Reader:
    """Reads contracts out of one release's namespace."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self.sites: list[Site] = []  # every raise/warn met, for the catalogue
        self._effective: dict[str, list[list[Any]] | None] = {}

    def contract(self, target: Target) -> Contract:
        function, owner, module = self._callable(target)
        result = Contract()
        if function is None:
            overloads = [
                parameters(item, _drops_first(item, _is_method(target) or target.kind == CLASS))
                for item in target.overloads
            ]
            result.signatures = overloads
            return result
        method = owner is not None
        effective = self.effective_parameters(function, owner, module, 0)
        overloads = [
            parameters(item, _drops_first(item, method)) for item in self._overloads(target, owner)
        ]
        if effective is not None:
            result.signatures = [effective]
        elif overloads:
            result.signatures = overloads
        else:
            result.signatures = [parameters(function, _drops_first(function, method))]
        own = parameters(function, _drops_first(function, method))
        # A forwarder's `*args, **kwargs` stay names of its own: what it hands
        # on binds the callee's parameters to the effective ones of the same name.
        params = {item[0] for item in (effective or own)} | {
            item[0] for item in own if item[1] in ("v", "w")
        }
        env = Env(params)
        reading = _Reading(self, module, owner, 0, target if target.kind == CLASS else owner)
        reading.block(function.body, [], env)
        result.guards = reading.guards
        result.deprecations = self._decorated(target, function) + reading.always_warns
        return result

    def _overloads(self, target: Target, owner: Target | None) -> tuple[ast.FunctionDef, ...]:
        if target.kind == CLASS and owner is not None:
            init = self.namespace.class_member(owner, "__init__", set())
            return init.overloads if init is not None else ()
        return target.overloads

    def _callable(self, target: Target) -> tuple[Function | None, Target | None, str]:
        """The function a call of ``target`` runs, the class it belongs to, and
        the module it is written in."""
        if target.kind == CLASS:
            init = self.namespace.class_member(target, "__init__", set())
            if init is None or not isinstance(init.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return None, target, target.module
            return init.node, self._owner(init) or target, init.module
        if target.kind == DEF and isinstance(target.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owner = self._owner(target) if _is_method(target) else None
            return target.node, owner, target.module
        return None, None, target.module

    def _owner(self, member: Target) -> Target | None:
        owner = member.qualname.rsplit(".", 1)[0]
        found = self.namespace.modules.get(member.module)
        if found is None or owner not in found.bindings:
            return None
        node = found.bindings[owner].node
        return Target(CLASS, member.module, owner, node) if isinstance(node, ast.ClassDef) else None

    def effective_parameters(
        self,
        function: ast.FunctionDef | ast.AsyncFunctionDef,
        owner: Target | None,
        module: str,
        depth: int,
    ) -> list[list[Any]] | None:
        """The parameters of a ``(*args, **kwargs)`` forwarder: what it calls takes."""
        own = parameters(function, _drops_first(function, owner is not None))
        var_positional = next((item[0] for item in own if item[1] == "v"), None)
        var_keyword = next((item[0] for item in own if item[1] == "w"), None)
        if var_positional is None or var_keyword is None or depth > MAX_DEPTH:
            return None
        key = f"{module}:{function.lineno}:{function.name}"
        if key in self._effective:
            return self._effective[key]
        self._effective[key] = None
        for statement in function.body:
            call = _statement_call(statement)
            if call is None or not _forwards(call, var_positional, var_keyword):
                continue
            callee, callee_owner, callee_module = self.callee(call, owner, module)
            if callee is None:
                continue
            inner = self.effective_parameters(callee, callee_owner, callee_module, depth + 1)
            if inner is None:
                inner = parameters(callee, _drops_first(callee, callee_owner is not None))
            bound = len([item for item in call.args if not isinstance(item, ast.Starred)])
            named = {item.arg for item in call.keywords if item.arg}
            explicit = [item for item in own if item[1] not in ("v", "w")]
            remaining = [
                item
                for index, item in enumerate(inner)
                if not (index < bound and item[1] in ("p", "a"))
            ]
            remaining = [item for item in remaining if item[0] not in named]
            result = explicit + [
                item for item in remaining if item[0] not in {e[0] for e in explicit}
            ]
            self._effective[key] = result
            return result
        return None

    def callee(
        self, call: ast.Call, owner: Target | None, module: str, concrete: Target | None = None
    ) -> tuple[Function | None, Target | None, str]:
        """The function a call in a body runs (``super().__init__``,
        ``Base.__init__``, ``self.method``, a function or class of the
        package), its class, and its module. ``self.method`` is looked up on
        ``concrete``, the class of the object being built (an override in a
        subclass wins, as Python's dispatch has it); ``super()`` on the bases
        of ``owner``, the class whose body the call is written in."""
        func = call.func
        nothing: tuple[Function | None, Target | None, str] = (None, None, module)
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and _dotted(func.value.func) == "super"
            and owner is not None
        ):
            for base in self.namespace.bases(owner):
                member = self.namespace.class_member(base, func.attr, set())
                if member is not None:
                    return self._callable(member)
            return nothing
        source = self.namespace.modules.get(module)
        if source is None:
            return nothing
        if isinstance(func, ast.Attribute) and _dotted(func.value) == "self" and owner is not None:
            member = self.namespace.class_member(concrete or owner, func.attr, set())
            return self._callable(member) if member is not None else nothing
        if isinstance(func, ast.Attribute) and func.attr == "__init__":
            parent = self.namespace.expression(source, func.value, set())
            if parent is not None and parent.kind == CLASS:
                initialiser = self.namespace.class_member(parent, "__init__", set())
                if initialiser is not None:
                    return self._callable(initialiser)
            return nothing
        target = self.namespace.expression(source, func, set())
        return nothing if target is None else self._callable(target)

    def _decorated(
        self, target: Target, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> list[dict[str, Any]]:
        found = []
        nodes: list[ast.AST] = [function]
        if target.kind == CLASS and target.node is not None:
            nodes.append(target.node)
        for node in nodes:
            for decorator in getattr(node, "decorator_list", []):
                if not isinstance(decorator, ast.Call) or not decorator.args:
                    continue
                name = _dotted(decorator.func) or ""
                if not name.endswith("deprecated"):
                    continue
                text = message(decorator.args[0], Env(set()))
                category = "DeprecationWarning"
                for item in decorator.keywords:
                    if item.arg == "category":
                        category = (_dotted(item.value) or category).rsplit(".", 1)[-1]
                found.append(
                    {
                        "message": "".join(part for part in text if isinstance(part, str)),
                        "category": category,
                    }
                )
        return found


def _statement_call(statement: ast.stmt) -> ast.Call | None:
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return statement.value
    if isinstance(statement, (ast.Assign, ast.AnnAssign)) and isinstance(statement.value, ast.Call):
        return statement.value
    if isinstance(statement, ast.Return) and isinstance(statement.value, ast.Call):
        return statement.value
    return None


def _forwards(call: ast.Call, var_positional: str, var_keyword: str) -> bool:
    stars = any(
        isinstance(item, ast.Starred)
        and isinstance(item.value, ast.Name)
        and item.value.id == var_positional
        for item in call.args
    )
    splats = any(
        item.arg is None and isinstance(item.value, ast.Name) and item.value.id == var_keyword
        for item in call.keywords
    )
    return stars and splats


def _touches_self(call: ast.Call) -> bool:
    """A call that may change attributes of ``self``: a method of it, or one
    given it as an argument."""
    if isinstance(call.func, ast.Attribute) and _dotted(call.func.value) == "self":
        return True
    arguments = [*call.args, *(item.value for item in call.keywords)]
    return any(isinstance(item, ast.Name) and item.id == "self" for item in arguments)


def _may_return(statement: ast.stmt) -> bool:
    """Whether a loop or ``try`` can leave its function with a ``return``
    (one of a nested function or class is that one's)."""
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            return True
        for child in ast.iter_child_nodes(node):
            if not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
            ):
                pending.append(child)
    return False


def _forget_self(env: Env) -> None:
    for key in [key for key in env.subst if key.startswith("self.")]:
        env.forget(key)


class _Reading:
    """One pass over a body, collecting its guards."""

    def __init__(
        self, reader: Reader, module: str, owner: Target | None, depth: int, concrete: Target | None
    ) -> None:
        self.reader = reader
        self.module = module
        self.owner = owner
        self.concrete = concrete  # the class of `self`: the one being built
        self.depth = depth
        self.guards: list[dict[str, Any]] = []
        self.always_warns: list[dict[str, Any]] = []

    def block(self, body: list[ast.stmt], path: list[Expr | None], env: Env) -> str:
        """Read a block: how it always leaves (RAISES, RETURNS), or "" when it may
        fall through."""
        for statement in body:
            leaves = self.statement(statement, path, env)
            if leaves:
                return leaves
        return ""

    def statement(self, statement: ast.stmt, path: list[Expr | None], env: Env) -> str:
        if isinstance(statement, ast.Raise):
            self._raise(statement, path, env)
            return RAISES
        if isinstance(statement, (ast.Return, ast.Continue, ast.Break)):
            return RETURNS
        if isinstance(statement, ast.If):
            return self._if(statement, path, env)
        if isinstance(statement, ast.Assert):
            condition = negation(convert(statement.test, env))
            self._add(
                [*path, condition], "AssertionError", None, message(statement.msg, env), statement
            )
            return ""
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            return self.block(statement.body, path, env)
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            self._call(statement.value, path, env)
            return ""
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            self._assign(statement, path, env)
            return ""
        for node in ast.walk(statement):  # loops, try, aug-assignments: forget what they write
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
                dotted = _dotted(node)
                if dotted is not None:
                    env.forget(dotted)
        if _may_return(statement):
            # `for hook in hooks: if ...: return` then `raise`: what follows runs
            # only when the loop (or try) did not return, on a condition unread
            path.append(None)
        return ""

    def _if(self, statement: ast.If, path: list[Expr | None], env: Env) -> str:
        """Both branches, each under its condition. A branch that returns adds
        the other's condition to every later check; one that raises does not:
        whether an earlier check raises first or this one does, the call raises
        (so ``if isinstance(dataset, IterableDataset): raise`` leaves the later
        checks decidable)."""
        test = convert(statement.test, env)
        body_env, else_env = env.child(), env.child()
        body_leaves = self.block(statement.body, [*path, test], body_env)
        else_path = path if body_leaves == RAISES else [*path, negation(test)]
        else_leaves = self.block(statement.orelse, else_path, else_env)
        for branch_env in (body_env, else_env):
            for name in set(env.subst) | set(branch_env.subst):
                if env.subst.get(name) != branch_env.subst.get(name):
                    env.forget(name)
        if body_leaves and else_leaves:
            return RAISES if body_leaves == else_leaves == RAISES else RETURNS
        if body_leaves == RETURNS:
            path.append(negation(test))
        elif else_leaves == RETURNS:
            path.append(test)
        return ""

    def _assign(
        self, statement: ast.Assign | ast.AnnAssign, path: list[Expr | None], env: Env
    ) -> None:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if isinstance(statement.value, ast.Call):
            self._call(statement.value, path, env)
        value = convert(statement.value, env)
        for target in targets:
            dotted = _dotted(target)
            if dotted is None:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        env.forget(node.id)
                continue
            env.forget(dotted)
            if value is not None and len(targets) == 1:
                env.subst[dotted] = value

    def _call(self, call: ast.Call, path: list[Expr | None], env: Env) -> None:
        name = _dotted(call.func) or ""
        last = name.rsplit(".", 1)[-1]
        if last == "warn" and name in ("warnings.warn", "warn", "_warnings.warn"):
            self._warn(call, path, env)
            return
        if last in _CHECKS and name.startswith(("torch.", "_")):
            self._check(call, last, path, env)
            return
        if self.depth >= MAX_DEPTH:
            return
        callee, owner, module = self.reader.callee(call, self.owner, self.module, self.concrete)
        if callee is None:
            if _touches_self(call):
                _forget_self(env)  # an unread method may set any attribute
            return
        shares_self = (
            owner is not None
            and self.owner is not None
            and (
                isinstance(call.func, ast.Attribute)
                and (
                    call.func.attr == "__init__"
                    or _dotted(call.func.value) == "self"
                    or isinstance(call.func.value, ast.Call)
                )
            )
        )
        callee_env = self._bind(callee, owner, call, env, shares_self)
        if callee_env is None:
            if _touches_self(call):
                _forget_self(env)
            return
        inner = _Reading(
            self.reader, module, owner, self.depth + 1, self.concrete if shares_self else owner
        )
        inner.block(callee.body, list(path), callee_env)
        self.guards.extend(inner.guards)
        if shares_self:
            # What the callee left of `self`: its assignments, and its forgetting.
            for key in [key for key in env.subst if key.startswith("self.")]:
                if key not in callee_env.subst:
                    env.forget(key)
            for key, value in callee_env.subst.items():
                if key.startswith("self."):
                    env.subst[key] = value
        elif _touches_self(call):
            _forget_self(env)

    def _bind(
        self,
        callee: ast.FunctionDef | ast.AsyncFunctionDef,
        owner: Target | None,
        call: ast.Call,
        env: Env,
        shares_self: bool,
    ) -> Env | None:
        """The callee's parameters as expressions over the caller's."""
        params = parameters(callee, _drops_first(callee, owner is not None))
        bound: dict[str, Expr] = {}
        forwarded: set[str] = set()
        positional = [item for item in params if item[1] in ("p", "a")]
        for index, argument in enumerate(call.args):
            if isinstance(argument, ast.Starred):
                if isinstance(argument.value, ast.Name) and argument.value.id in env.params:
                    forwarded.update(item[0] for item in positional[index:])
                    break
                return None
            if index >= len(positional):
                return None
            converted = convert(argument, env)
            if converted is not None:
                bound[positional[index][0]] = converted
        unknown_keywords = False
        for keyword in call.keywords:
            if keyword.arg is None:
                if isinstance(keyword.value, ast.Name) and keyword.value.id in env.params:
                    forwarded.update(
                        item[0] for item in params if item[1] in ("a", "k") and item[0] not in bound
                    )
                else:
                    unknown_keywords = True  # `**factory_kwargs`: may set any parameter
                continue
            converted = convert(keyword.value, env)
            if converted is not None:
                bound[keyword.arg] = converted
        written = {keyword.arg for keyword in call.keywords if keyword.arg}
        for name, kind, default in params:
            if name in bound or name in forwarded or name in written or unknown_keywords:
                continue
            if kind in ("p", "a", "k") and default is not None and default != ["?"]:
                bound[name] = default
        inner = Env(set(forwarded))
        inner.subst = bound
        if shares_self:
            inner.subst.update(
                {key: value for key, value in env.subst.items() if key.startswith("self.")}
            )
        return inner

    def _raise(self, statement: ast.Raise, path: list[Expr | None], env: Env) -> None:
        exception = statement.exc
        name = "Exception"
        text: list[Expr] = []
        if isinstance(exception, ast.Call):
            name = (_dotted(exception.func) or name).rsplit(".", 1)[-1]
            text = message(exception.args[0] if exception.args else None, env)
        elif exception is not None:
            name = (_dotted(exception) or name).rsplit(".", 1)[-1]
        if name == "NotImplementedError" and self.depth > 0:
            return  # an abstract method of a base met through a call: not this callable's check
        self._add(path, name, None, text, statement)

    def _warn(self, call: ast.Call, path: list[Expr | None], env: Env) -> None:
        category = "UserWarning"
        if len(call.args) > 1:
            category = (_dotted(call.args[1]) or category).rsplit(".", 1)[-1]
        for item in call.keywords:
            if item.arg == "category":
                category = (_dotted(item.value) or category).rsplit(".", 1)[-1]
        text = message(call.args[0] if call.args else None, env)
        if not path and self.depth == 0:
            plain = "".join(part if isinstance(part, str) else "…" for part in text)
            if category in _DEPRECATION_CATEGORIES or "deprecat" in plain.lower():
                self.always_warns.append({"message": plain, "category": category})
                self._site("warn", category, text, ["const", True], call)
                return
        self._add(path, None, category, text, call)

    def _check(self, call: ast.Call, kind: str, path: list[Expr | None], env: Env) -> None:
        arguments = list(call.args)
        exception = _CHECKS[kind]
        if exception is None:
            if not arguments:
                return
            exception = (_dotted(arguments.pop(0)) or "RuntimeError").rsplit(".", 1)[-1]
        if not arguments:
            return
        condition = negation(convert(arguments[0], env))
        text = message(arguments[1] if len(arguments) > 1 else None, env)
        self._add([*path, condition], exception, None, text, call)

    def _add(
        self,
        path: list[Expr | None],
        raises: str | None,
        warns: str | None,
        text: list[Expr],
        node: ast.AST,
    ) -> None:
        when = conjunction(path)
        if when is not None and not referenced(when):
            value = evaluate(when, {})
            if value is not UNKNOWN and not value:
                return  # a check of the package's own state that a call cannot make true
            when = ["const", True] if value is not UNKNOWN else when
        self._site("raise" if raises else "warn", raises or warns or "", text, when, node)
        if when is None:
            return
        plain = "".join(part if isinstance(part, str) else "…" for part in text)
        self.guards.append(
            {
                "when": when,
                "raises": raises,
                "warns": warns,
                "deprecation": warns is not None
                and (warns in _DEPRECATION_CATEGORIES or "deprecat" in plain.lower()),
                "message": text,
            }
        )

    def _site(
        self, kind: str, exception: str, text: list[Expr], when: Expr | None, node: ast.AST
    ) -> None:
        self.reader.sites.append(
            Site(self.module, getattr(node, "lineno", 0), kind, exception, text, when)
        )
