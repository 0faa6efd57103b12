"""The review engine's pass: walk a parsed file once and let rules speak.

Data flows one way: ``ast`` -> one pass that keeps a
:class:`~torchwise.review.engine.context.Context` current (names, values,
branches, scopes) and dispatches each node to the rules subscribed to its type
-> region events (leaving a loop, a function, a class, the module) ->
findings. Parsing a source, recovering from a syntax error and ``noqa`` are
the runner's (see :mod:`torchwise.review.analysis`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from torchwise.findings import Finding, Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import (
    Binding,
    ClassFrame,
    Context,
    Scope,
)
from torchwise.review.engine.dispatch import LEAF_TYPES, fields_of, subscriptions
from torchwise.review.engine.facts import Value
from torchwise.review.engine.tensors import ACCEL, Place, TensorInfo
from torchwise.review.engine.tracking import Tracker, builds_model
from torchwise.review.engine.view import ProjectView
from torchwise.review.registry import Rule, all_rules

if TYPE_CHECKING:
    from torchwise.review.settings import ReviewSettings

Handler = Callable[[Any, Context], None]
#: A visit_Call handler with its rule's ``call_names`` and ``call_methods``.
CallSubscriber = tuple[Handler, frozenset[str] | None, frozenset[str] | None]

_NO_GRAD = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"}
_ENABLE_GRAD = {"torch.enable_grad", "torch.autograd.enable_grad"}


def analyse_tree(
    tree: ast.Module,
    source: str,
    path: str,
    enabled: frozenset[str],
    settings: ReviewSettings | None,
    view: ProjectView,
    observers: Iterable[Rule] = (),
) -> list[Finding]:
    """Every finding of the ``enabled`` rules in one parsed file, before ``noqa``.

    ``view`` is the project as this file sees it (the runner builds it, from
    the project index or from the file alone). ``observers`` ride the same pass
    as the rules without being registered: the index's summariser, praise."""
    ctx = Context(path, source, settings, view)
    rules = [*_rules_for(source, enabled), *observers]
    try:
        Walk(ctx, rules).run(tree)
    except RecursionError:
        ctx.findings.append(too_deep(path))
    return ctx.findings


def _rules_for(source: str, enabled: frozenset[str]) -> list[Rule]:
    """A fresh instance of each enabled rule that the source can give a finding."""
    lowered: str | None = None
    rules = []
    for code, info in all_rules().items():
        if code not in enabled:
            continue
        needs = info.cls.needs_text
        if needs:
            lowered = source.lower() if lowered is None else lowered
            if not any(text in lowered for text in needs):
                continue
        rules.append(info.cls())
    return rules


def too_deep(path: str, line: int = 1) -> Finding:
    """TW000 for a file nested too deeply for the pass to finish (the findings
    made before it stopped are kept)."""
    return Finding(
        code="TW000",
        message="file could not be parsed: too deeply nested to analyse fully",
        path=path,
        line=line,
        column=1,
        end_line=line,
        end_column=1,
        severity=Severity.ERROR,
    )


_CHANGES_DEFAULT_DEVICE = re.compile(
    r"set_default_tensor_type\([^)]*cuda|set_default_device\(\s*(?!['\"]cpu)"
)


class Walk(Tracker):
    """One depth-first walk that keeps the context current and calls handlers."""

    def __init__(self, ctx: Context, rules: list[Rule]) -> None:
        self.ctx = ctx
        self.handlers: dict[type[ast.AST], list[Handler]] = {}
        self.events: dict[str, list[Handler]] = {
            event: [] for event in ("leave_loop", "leave_function", "leave_class", "leave_module")
        }
        # visit_Call handlers with the calls they act on (None: all), in rule order.
        self.call_subscribers: list[CallSubscriber] = []
        for rule in rules:
            node_types, events = subscriptions(type(rule))
            for node_type, name in node_types:
                if node_type is ast.Call:
                    handler = getattr(rule, name)
                    self.call_subscribers.append((handler, rule.call_names, rule.call_methods))
                else:
                    self.handlers.setdefault(node_type, []).append(getattr(rule, name))
            for name in events:
                self.events[name].append(getattr(rule, name))
        # (resolved name, method name) of a call -> the handlers it goes to
        self.call_handlers: dict[tuple[str | None, str | None], list[Handler]] = {}
        self.failed: set[str] = set()
        self.special: dict[type[ast.AST], Callable[[Any], None]] = {
            ast.Import: self._import,
            ast.ImportFrom: self._import_from,
            ast.ClassDef: self._class,
            ast.FunctionDef: self._function,
            ast.AsyncFunctionDef: self._function,
            ast.For: self._loop,
            ast.AsyncFor: self._loop,
            ast.While: self._loop,
            ast.With: self._with,
            ast.AsyncWith: self._with,
            ast.Call: self._call,
            ast.Assign: self._assign,
            ast.AnnAssign: self._assign,
            ast.AugAssign: self._aug_assign,
            ast.If: self._if,
            ast.Try: self._try,
            ast.Expr: self._expr,
            ast.Subscript: self._subscript,
        }
        # node type -> the one function that visits such a node (None: skipped),
        # decided when the type is first met (see _visitor).
        self.visitors: dict[type, Callable[[Any], None] | None] = {ast.Call: self._visit_call}

    def _subscript(self, node: ast.Subscript) -> None:
        """``checkpoint["optimizer"]`` on what ``torch.load`` returned, wherever it
        is read (an argument, a condition): the key the load reads."""
        key = node.slice
        if (
            isinstance(node.ctx, ast.Load)
            and isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and isinstance(node.value, (ast.Name, ast.Attribute))
        ):
            value = self.ctx.value_of(node.value)
            load = None if value is None or value.kind != F.LOADED else value.node
            if value is not None and value.key is None and isinstance(load, ast.Call):
                facts = self.ctx.module.loads.get(load)
                if facts is not None:
                    facts.keys.add(key.value)
        self.children(node)

    def run(self, tree: ast.Module) -> None:
        self.ctx.module.node = tree
        # `torch.set_default_tensor_type("torch.cuda.FloatTensor")` or
        # `torch.set_default_device("cuda")` anywhere: factories may build on the GPU.
        self.ctx.default_device_changed = (
            _CHANGES_DEFAULT_DEVICE.search(self.ctx.source) is not None
        )
        self._prescan(tree.body)
        self.ctx.forget_names()
        self.visit(tree)
        self.fire("leave_module", self.ctx.module, tree)

    def fire(self, event: str, facts: Any, node: ast.AST) -> None:
        for handler in self.events[event]:
            try:
                handler(facts, self.ctx)
            except RecursionError:
                raise
            except Exception as exc:  # one broken rule must not stop the review
                self.rule_failed(handler, exc, node)

    def rule_failed(self, handler: Handler, exc: Exception, node: ast.AST) -> None:
        """Report a rule's own crash once per file, as a finding, and go on."""
        code = getattr(getattr(handler, "__self__", None), "code", "rule")
        if code in self.failed:
            return
        self.failed.add(code)
        line = getattr(node, "lineno", 1)
        self.ctx.findings.append(
            Finding(
                code="TW000",
                message=(
                    f"internal error in {code} ({type(exc).__name__}: {exc}); "
                    "the other rules ran. Please report this."
                ),
                path=self.ctx.path,
                line=line,
                column=1,
                end_line=line,
                end_column=1,
                severity=Severity.ERROR,
            )
        )

    def _prescan(self, body: list[ast.stmt]) -> None:
        """Bind module-level imports and classes first, as pyflakes defers
        function bodies: code may use a name imported further down."""
        for statement in body:
            if isinstance(statement, ast.Import):
                self._import(statement)
            elif isinstance(statement, ast.ImportFrom):
                self._import_from(statement)
            elif isinstance(statement, ast.ClassDef):
                self.ctx.scopes[0].classes.add(statement.name)
                if any(self.ctx.is_module_base(base) for base in statement.bases):
                    self.ctx.scopes[0].module_classes.add(statement.name)
            elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.ctx.scopes[0].functions.add(statement.name)
            elif isinstance(statement, ast.Assign):
                self._prescan_global(statement)
            elif isinstance(statement, ast.If):
                self._prescan(statement.orelse)
                self._prescan(statement.body)  # the first branch wins, as in most readers
            elif isinstance(statement, ast.Try):
                # ``try: import new / except ImportError: import old``: the try body is
                # what the code means; fallbacks are bound first so it overrides them.
                for handler in statement.handlers:
                    self._prescan(handler.body)
                self._prescan(statement.body)

    def visit(self, node: ast.AST) -> None:
        kind = type(node)
        visitor = self.visitors[kind] if kind in self.visitors else self._visitor(kind, node)
        if visitor is not None:
            visitor(node)

    def _visitor(self, kind: type, node: Any) -> Callable[[Any], None] | None:
        """How a node of type ``kind`` is visited: its handlers, then the special
        walk or its children. None for what nobody listens to and has no
        children (most Names and Constants, operators, strings in lists), so
        the walk does not even call a function for them: that is half the
        nodes of a file. Decided once per type, not per node."""
        handlers = self.handlers.get(kind)
        then = self.special.get(kind)
        if then is None:
            if not handlers and (
                not isinstance(node, ast.AST) or kind in LEAF_TYPES or not fields_of(node)
            ):
                self.visitors[kind] = None
                return None
            then = self.children
        visitor = then if not handlers else self._with_handlers(handlers, then)
        self.visitors[kind] = visitor
        return visitor

    def _with_handlers(
        self, handlers: list[Handler], then: Callable[[Any], None]
    ) -> Callable[[Any], None]:
        run = self._run

        def visitor(node: Any) -> None:
            run(handlers, node)
            then(node)

        return visitor

    def _run(self, handlers: list[Handler], node: Any) -> None:
        ctx = self.ctx
        for handler in handlers:
            try:
                handler(node, ctx)
            except RecursionError:
                raise
            except Exception as exc:  # one broken rule must not stop the review
                self.rule_failed(handler, exc, node)

    def _visit_call(self, node: ast.Call) -> None:
        handlers = self._handlers_of_call(node)
        if handlers:
            self._run(handlers, node)
        self._call(node)

    def _handlers_of_call(self, call: Any) -> list[Handler]:
        func = call.func
        key = (self.ctx.call_name(call), func.attr if isinstance(func, ast.Attribute) else None)
        found = self.call_handlers.get(key)
        if found is None:
            name, method = key
            found = self.call_handlers[key] = [
                handler
                for handler, names, methods in self.call_subscribers
                if (names is None and methods is None)
                or (names is not None and name in names)
                or (methods is not None and method in methods)
            ]
        return found

    def children(self, node: ast.AST) -> None:
        fields = fields_of(node)
        if not fields:
            return  # a Name, a Constant, ...: nothing below it but its context
        parents = self.ctx.parents
        parents.append(node)
        visitors = self.visitors
        for name in fields:
            value = getattr(node, name, None)
            if value is None:
                continue
            for item in value if type(value) is list else (value,):
                kind = type(item)
                visitor = visitors[kind] if kind in visitors else self._visitor(kind, item)
                if visitor is not None:
                    visitor(item)
        parents.pop()

    def visit_all(self, parent: ast.AST, nodes: Iterable[ast.AST]) -> None:
        self.ctx.parents.append(parent)
        for node in nodes:
            self.visit(node)
        self.ctx.parents.pop()

    # -- bindings ----------------------------------------------------------------
    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.ctx.bind_import(alias.asname, alias.name)
            else:
                top = alias.name.split(".", 1)[0]
                self.ctx.bind_import(top, top)

    def _import_from(self, node: ast.ImportFrom) -> None:
        # Relative imports keep their dots ("..models.Net"): they name the
        # project's own code, which only the project index can resolve.
        module = "." * node.level + (node.module or "")
        if not module:
            return
        separator = "" if module.endswith(".") else "."
        for alias in node.names:
            if alias.name == "*":
                self._star_import(module)
            else:
                qualname = f"{module}{separator}{alias.name}"
                self.ctx.bind_import(alias.asname or alias.name, qualname)

    def _star_import(self, module: str) -> None:
        """``from models import *``: the names the project module defines and
        imports (torch too, when it imported torch), from the index; without
        one, the conventional aliases (``torch``, ``nn``, ``F``, ``np``)."""
        ctx = self.ctx
        ctx.module.star_imports = True
        names = ctx.project.star_names(module)
        if names is None and not module.startswith(("torch", "numpy")):
            names = {alias: qualname for alias, qualname in _CONVENTIONAL.items()}
        for local, qualname in (names or {}).items():
            if local not in ctx.scopes[-1].imports:
                ctx.bind_import(local, qualname)

    def _class(self, node: ast.ClassDef) -> None:
        self.visit_all(node, [*node.decorator_list, *node.bases, *node.keywords])
        is_module = any(self.ctx.is_module_base(base) for base in node.bases)
        self.ctx.scopes[-1].classes.add(node.name)
        if is_module:
            self.ctx.scopes[-1].module_classes.add(node.name)
        frame = ClassFrame(node, is_module)
        self.ctx.classes.append(frame)
        self.ctx.scopes.append(Scope("class"))
        self.ctx.forget_values()
        self.visit_all(node, node.body)
        self.ctx.scopes.pop()
        self.ctx.forget_values()
        self.fire("leave_class", frame, node)
        self.ctx.classes.pop()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        ctx = self.ctx
        self.visit_all(node, [*node.decorator_list, node.args])
        if node.returns is not None:
            self.visit_all(node, [node.returns])
        directly_in_class = ctx.scopes[-1].kind == "class"
        in_module_class = directly_in_class and bool(ctx.classes) and ctx.classes[-1][1]
        no_grad = any(self._context_kind(d) == "no_grad" for d in node.decorator_list)
        function = F.FunctionFacts(
            node=node,
            name=node.name,
            class_name=ctx.classes[-1][0].name if directly_in_class and ctx.classes else None,
            in_module_class=in_module_class,
            no_grad=no_grad,
        )
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        function.params = tuple(arg.arg for arg in arguments)
        if directly_in_class and ctx.classes:
            function.target = ctx.project.own(f"{ctx.classes[-1].node.name}.{node.name}")
        elif not ctx.functions:
            function.target = ctx.project.own(node.name)
        scope = Scope("function")
        passed = ctx.project.parameter_values(function)
        placed = self._input_place(function) if in_module_class else None
        for arg in arguments:
            kind = self._kind_of_annotation(arg.annotation)
            if arg.arg in ctx.scopes[0].imports or any(arg.arg in s.imports for s in ctx.scopes):
                scope.imports[arg.arg] = ""  # a parameter shadows an import of the same name
            value = passed.get(arg.arg) or (None if kind is None else Value(kind))
            if value is None and placed is not None and _tensor_input(node, arg):
                value = Value(F.TENSOR, tensor=placed)
            if value is not None:
                scope.values[arg.arg] = [Binding(value, ())]
        # A nested function's body does not run where it is defined: it starts
        # with no enclosing loop or no_grad of its own.
        saved = (ctx.loops, ctx.no_grad_depth, ctx.branch)
        ctx.loops, ctx.no_grad_depth, ctx.branch = [], int(no_grad), ()
        ctx.functions.append(function)
        ctx.scopes.append(scope)
        ctx.forget_values()
        self.visit_all(node, node.body)
        ctx.scopes.pop()
        ctx.functions.pop()
        ctx.forget_values()
        ctx.loops, ctx.no_grad_depth, ctx.branch = saved
        ctx.module.functions.append(function)
        self.fire("leave_function", function, node)

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        ctx = self.ctx
        if isinstance(node, ast.While):
            self.visit_all(node, [node.test])
        else:
            self.visit_all(node, [node.target, node.iter])
        loop = F.LoopFacts(
            node=node,
            outer=ctx.loops[-1] if ctx.loops else None,
            function=ctx.function,
            branch=ctx.branch,
        )
        if not isinstance(node, ast.While):
            iterated = _iterated(node.iter)
            loop.iterated = ctx.dotted(iterated)
            loop.iterates = ctx.value_of(iterated)
            self._bind_batches(node, loop.iterates)
        ctx.loops.append(loop)
        saved_branch = ctx.branch
        self.visit_all(node, node.body)
        ctx.loops.pop()
        ctx.branch = saved_branch
        self.visit_all(node, node.orelse)
        ctx.branch = saved_branch
        (ctx.function.loops if ctx.function else ctx.module.loops).append(loop)
        self.fire("leave_loop", loop, node)

    def _bind_batches(self, loop: ast.For | ast.AsyncFor, iterates: Value | None) -> None:
        """``for x, y in loader``: each name holds what a batch holds (when the
        loader's dataset shows it: see TensorReader.batch_of)."""
        info = None if iterates is None else iterates.tensor
        if iterates is None or iterates.kind not in (F.LOADER, F.TENSORS) or info is None:
            return
        target = _batches_target(loop)
        if target is None:
            return
        if isinstance(target, (ast.Name, ast.Attribute)):
            kind = F.TENSORS if iterates.kind == F.LOADER else F.TENSOR
            self.ctx.bind(target, Value(kind, tensor=info if kind == F.TENSORS else info.element()))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for position, item in enumerate(target.elts):
                if isinstance(item, (ast.Name, ast.Attribute)):
                    self.ctx.bind(item, Value(F.TENSOR, tensor=info.element(position)))

    def _input_place(self, function: F.FunctionFacts) -> TensorInfo | None:
        """What the inputs of a module's ``forward`` hold when the project moves
        the module to the device: tensors there (a caller that passes them on
        the CPU is where the crash is)."""
        frame = self.ctx.classes[-1] if self.ctx.classes else None
        if frame is None or function.name != "forward":
            return None
        placement = self.ctx.project.placement(self.ctx.project.own(frame.node.name))
        if placement is None:
            return None
        where, line = placement
        name = frame.node.name
        why = f"an input of `{name}.forward`, and the project moves `{name}` to the device"
        path = None if where == self.ctx.path else where
        return TensorInfo(place=Place(ACCEL, line, why, path), batched=True)

    def _context_kind(self, expr: ast.expr) -> str | None:
        target = expr.func if isinstance(expr, ast.Call) else expr
        qualname = self.ctx.qualname(target)
        if qualname in _NO_GRAD:
            return "no_grad"
        if qualname in _ENABLE_GRAD:
            return "enable_grad"
        return None

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        ctx = self.ctx
        self.visit_all(node, node.items)
        for item in node.items:
            if item.optional_vars is not None:
                self._bind_target(item.optional_vars, None, None)
        saved = ctx.no_grad_depth
        for item in node.items:
            kind = self._context_kind(item.context_expr)
            if kind == "no_grad":
                ctx.no_grad_depth += 1
            elif kind == "enable_grad":
                ctx.no_grad_depth = 0
        saved_branch = ctx.branch
        self.visit_all(node, node.body)
        ctx.no_grad_depth = saved
        ctx.branch = saved_branch

    def _call(self, node: ast.Call) -> None:
        ctx = self.ctx
        func = node.func
        method = receiver = receiver_value = None
        if isinstance(func, ast.Attribute):
            method = func.attr
            receiver = ctx.dotted(func.value)
            receiver_value = ctx.value_of(func.value)
        qualname = ctx.call_name(node)
        callee_value = None
        if isinstance(func, (ast.Name, ast.Attribute)) and (qualname is None or method):
            callee_value = ctx.value_of(func)
        event = F.CallEvent(
            node=node,
            qualname=qualname,
            method=method,
            receiver=receiver,
            receiver_value=receiver_value,
            callee_value=callee_value,
            no_grad=ctx.in_no_grad,
            loop_depth=len(ctx.loops),
            branch=ctx.branch,
            target=ctx.project.call_target(ctx, node),
            builds_model=builds_model(ctx, qualname),
        )
        ctx.module.calls.append(event)
        self._note_load_use(event)
        if qualname == "torch.use_deterministic_algorithms" and node.args:
            first = node.args[0]
            literal = first.value if isinstance(first, ast.Constant) else None
            ctx.module.settings.append(
                F.SettingFacts(
                    node,
                    "deterministic_algorithms",
                    literal if isinstance(literal, bool) else None,
                    ctx.function,
                    ctx.branch,
                )
            )
        if (
            method == "requires_grad_"
            and isinstance(func, ast.Attribute)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value is False
        ):
            self._record_freeze(func.value, node)  # model.backbone.requires_grad_(False)
        if ctx.function is not None:
            ctx.function.calls.append(event)
        for loop in ctx.loops:
            loop.calls.append(event)
        self.children(node)

    def _try(self, node: ast.Try) -> None:
        """Each block of a ``try`` starts from the branch the ``try`` is on."""
        ctx = self.ctx
        saved = ctx.branch
        for block in (node.body, node.handlers, node.orelse, node.finalbody):
            self.visit_all(node, block)
            ctx.branch = saved

    def _if(self, node: ast.If) -> None:
        """Each branch knows its condition: a fact bound under ``if c:`` is not
        seen from ``else:``, and ``if c:`` twice means the same thing."""
        ctx = self.ctx
        self.visit_all(node, [node.test])
        test, polarity = condition(ctx, node.test)
        saved = ctx.branch
        ctx.branch = (*saved, (test, polarity))
        self.visit_all(node, node.body)
        ctx.branch = (*saved, (test, not polarity))
        self.visit_all(node, node.orelse)
        # `if c: return` / `continue`: the rest of the block runs only when c is false.
        body_ends, else_ends = _ends(node.body), _ends(node.orelse)
        if body_ends and not else_ends:
            ctx.branch = (*saved, (test, not polarity))
            ctx.guards.add((test, not polarity))
        elif else_ends and not body_ends:
            ctx.branch = (*saved, (test, polarity))
            ctx.guards.add((test, polarity))
        else:
            ctx.branch = saved


#: What a star import from an unindexed module most likely brought in.
_CONVENTIONAL = {
    "torch": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "optim": "torch.optim",
    "np": "numpy",
    "Variable": "torch.autograd.Variable",
}


def _ends(body: list[ast.stmt]) -> bool:
    """A block that never falls through to the statement after it."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def condition(ctx: Context, test: ast.expr) -> tuple[str, bool]:
    """(text, polarity) of an ``if`` test: ``not x`` is ``x`` false, ``x is None``
    is ``x is not None`` false."""
    polarity = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, polarity = test.operand, not polarity
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.IsNot, ast.NotEq))
    ):
        text = ctx.text(test).replace(" is not ", " is ").replace(" != ", " == ")
        return text, not polarity
    return ctx.text(test), polarity


def _iterated(expr: ast.expr) -> ast.expr:
    """What a ``for`` loop walks: ``loader`` in ``enumerate(tqdm(loader))``."""
    while isinstance(expr, ast.Call) and expr.args:
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name not in {"enumerate", "tqdm", "iter", "zip", "progress_bar", "track"}:
            break
        expr = expr.args[0]
    return expr


def _tensor_input(function: ast.FunctionDef | ast.AsyncFunctionDef, arg: ast.arg) -> bool:
    """A parameter of ``forward`` that holds a tensor: not ``self``, annotated as
    a tensor or not annotated, without a default other than None."""
    if arg.arg in {"self", "cls"} or function.name != "forward":
        return False
    if arg.annotation is not None and "Tensor" not in ast.unparse(arg.annotation):
        return False
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: dict[str, ast.expr | None] = dict.fromkeys(a.arg for a in positional)
    for item, given in zip(positional[::-1], arguments.defaults[::-1], strict=False):
        defaults[item.arg] = given
    for item, kw_given in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        defaults[item.arg] = kw_given
    found = defaults.get(arg.arg)
    return found is None or (isinstance(found, ast.Constant) and found.value is None)


#: Wrappers a loop iterates through without changing the items (``tqdm(loader)``).
_ITEM_WRAPPERS = {"tqdm", "iter", "progress_bar", "track", "trange"}


def _batches_target(loop: ast.For | ast.AsyncFor) -> ast.expr | None:
    """What receives each batch: ``x`` in ``for x in loader`` and ``for i, x in
    enumerate(tqdm(loader))``; None for ``zip(...)`` and other shapes."""
    expr, target = loop.iter, loop.target
    while isinstance(expr, ast.Call) and len(expr.args) >= 1:
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name == "enumerate":
            if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
                return None
            target = target.elts[1]
        elif name in {"zip", "map", "filter", "sorted", "reversed", "chain", "islice"}:
            return None
        elif name not in _ITEM_WRAPPERS:
            break  # the iterable itself: `DataLoader(dataset, ...)`
        expr = expr.args[0]
    return target
