"""The review engine: parse a file once, walk it once, let rules speak.

Data flows one way: source -> ``ast`` -> one pass that keeps a
:class:`~torchwise.review.context.Context` current and dispatches each node to
the rules subscribed to its type -> region events (leaving a loop, a function,
the module) -> findings, minus those suppressed by ``noqa``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from typing import Any

from torchwise.review import facts as F
from torchwise.review.context import (
    UNTRACKED,
    Binding,
    ClassFrame,
    Context,
    Scope,
    kind_from_callee,
    pass_through_arguments,
)
from torchwise.review.facts import Value
from torchwise.review.findings import Finding, Severity
from torchwise.review.project import ProjectView
from torchwise.review.registry import Rule, all_rules

Handler = Callable[[Any, Context], None]

_NO_GRAD = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"}
_ENABLE_GRAD = {"torch.enable_grad", "torch.autograd.enable_grad"}
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>TW\d{3}(?:[\s,]+TW\d{3})*))?", re.I)
_FILE_NOQA = re.compile(
    r"^\s*#\s*torchwise:\s*noqa(?::\s*(?P<codes>TW\d{3}(?:[\s,]+TW\d{3})*))?", re.I | re.M
)


def parse(source: str, path: str) -> ast.Module | Finding:
    """The file's tree, or the TW000 finding that says why there is none."""
    try:
        return ast.parse(source, filename=path, type_comments=False)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return _syntax_finding(path, exc)


def analyse_source(
    source: str,
    path: str,
    enabled: Iterable[str],
    settings: Any = None,
    *,
    view: ProjectView | None = None,
    tree: ast.Module | None = None,
) -> list[Finding]:
    """Every finding of the ``enabled`` rules in ``source``, noqa applied, sorted.

    ``view`` is the project index as this file sees it; without one, the file
    is its own project (its classes and functions are indexed first)."""
    enabled = frozenset(enabled)
    file_noqa = _file_suppressions(source)
    if file_noqa is not None and not file_noqa:
        return []  # "# torchwise: noqa" on its own line skips the whole file
    if tree is None:
        parsed = parse(source, path)
        if isinstance(parsed, Finding):
            return [parsed]
        tree = parsed
    if view is None:
        from torchwise.review.project import ProjectIndex
        from torchwise.review.summary import summarize_tree

        view = ProjectIndex([summarize_tree(tree, source, path)]).view(path)
    ctx = Context(path, source, settings, view)
    rules = [info.cls() for code, info in all_rules().items() if code in enabled]
    try:
        _Pass(ctx, rules).run(tree)
    except RecursionError:
        ctx.findings.append(
            _syntax_finding(path, SyntaxError("too deeply nested to analyse fully"))
        )
    suppressed_in_file = file_noqa or frozenset()
    line_noqa = _line_suppressions(ctx.lines)
    kept = [
        finding
        for finding in ctx.findings
        if finding.code not in suppressed_in_file and not _suppressed(finding, line_noqa)
    ]
    return sorted(set(kept), key=Finding.sort_key)


def _syntax_finding(path: str, exc: BaseException) -> Finding:
    line = getattr(exc, "lineno", None) or 1
    column = getattr(exc, "offset", None) or 1
    message = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    return Finding(
        code="TW000",
        message=f"file could not be parsed: {message}",
        path=path,
        line=line,
        column=max(column, 1),
        end_line=line,
        end_column=max(column, 1),
        severity=Severity.ERROR,
    )


def _file_suppressions(source: str) -> frozenset[str] | None:
    """None: no file-level noqa; empty: the whole file; else the codes ignored."""
    if "torchwise" not in source:
        return None
    codes: set[str] = set()
    found = False
    for match in _FILE_NOQA.finditer(source):
        found = True
        if match.group("codes") is None:
            return frozenset()
        codes |= set(re.findall(r"TW\d{3}", match.group("codes").upper()))
    return frozenset(codes) if found else None


def _line_suppressions(lines: list[str]) -> dict[int, frozenset[str] | None]:
    """line -> codes suppressed there (None: every code, a bare ``# noqa``)."""
    result: dict[int, frozenset[str] | None] = {}
    for number, line in enumerate(lines, start=1):
        if "noqa" not in line and "NOQA" not in line:
            continue
        match = _NOQA.search(line)
        if match is None:
            continue
        codes = match.group("codes")
        result[number] = None if codes is None else frozenset(re.findall(r"TW\d{3}", codes.upper()))
    return result


def _suppressed(finding: Finding, noqa: dict[int, frozenset[str] | None]) -> bool:
    for line in {finding.line, finding.end_line}:
        if line in noqa:
            codes = noqa[line]
            if codes is None or finding.code in codes:
                return True
    return False


class _Pass:
    """One depth-first walk that keeps the context current and calls handlers."""

    def __init__(self, ctx: Context, rules: list[Rule]) -> None:
        self.ctx = ctx
        self.handlers: dict[type[ast.AST], list[Handler]] = {}
        self.events: dict[str, list[Handler]] = {
            event: [] for event in ("leave_loop", "leave_function", "leave_class", "leave_module")
        }
        for rule in rules:
            node_types, events = _subscriptions(type(rule))
            for node_type, name in node_types:
                self.handlers.setdefault(node_type, []).append(getattr(rule, name))
            for name in events:
                self.events[name].append(getattr(rule, name))
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
        }
        # Leaves nobody listens to (most Names and Constants): not even visited.
        self.inert = frozenset(
            kind for kind in _LEAF_TYPES if kind not in self.handlers and kind not in self.special
        )

    def run(self, tree: ast.Module) -> None:
        self.ctx.module.node = tree
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

    def _prescan_global(self, statement: ast.Assign) -> None:
        """``model = Net()`` at module level (even under ``if __name__ == ...``,
        even below the functions that use it): functions see it, as at run time.
        Only the first such assignment of a name, and only a model, a loss
        function, an optimizer or a loader; the pass rebinds it in order."""
        ctx = self.ctx
        if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
            return
        name = statement.targets[0].id
        if name in ctx.scopes[0].values or not isinstance(statement.value, ast.Call):
            return
        value = ctx.value_of(statement.value)
        if value is not None and value.kind in _GLOBAL_KINDS:
            ctx.scopes[0].values[name] = [Binding(value, ())]

    def visit(self, node: ast.AST) -> None:
        kind = type(node)
        handlers = self.handlers.get(kind)
        if handlers:
            for handler in handlers:
                try:
                    handler(node, self.ctx)
                except RecursionError:
                    raise
                except Exception as exc:  # one broken rule must not stop the review
                    self.rule_failed(handler, exc, node)
        special = self.special.get(kind)
        if special is None:
            self.children(node)
        else:
            special(node)

    def children(self, node: ast.AST) -> None:
        fields = _CHILD_FIELDS.get(type(node))
        if fields is None:
            fields = _CHILD_FIELDS[type(node)] = _child_fields(node)
        if not fields:
            return  # a Name, a Constant, ...: nothing below it but its context
        parents = self.ctx.parents
        parents.append(node)
        visit = self.visit
        inert = self.inert
        for name in fields:
            value = getattr(node, name, None)
            if value is None:
                continue
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST) and type(item) not in inert:
                        visit(item)
            elif isinstance(value, ast.AST) and type(value) not in inert:
                visit(value)
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
        names = ctx.project.star_names(module)
        if names is None and not module.startswith(("torch", "numpy")):
            names = {alias: qualname for alias, qualname in _CONVENTIONAL.items()}
        for local, qualname in (names or {}).items():
            if local not in ctx.scopes[-1].imports:
                ctx.bind_import(local, qualname)

    def _assign(self, node: ast.Assign | ast.AnnAssign) -> None:
        self.children(node)
        value = node.value
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        bound = None if value is None else self.ctx.value_of(value)
        if bound is None and isinstance(value, _LITERALS):
            bound = UNTRACKED  # `loss = []`: the name no longer means a loss
        if bound is None and isinstance(node, ast.AnnAssign):
            kind = self._kind_of_annotation(node.annotation)
            bound = None if kind is None else Value(kind)
        if bound is not None and bound.kind == F.LOADED and bound.key is not None:
            self._load_key(bound)
        if bound is not None and bound.kind == F.OPTIMIZER and bound.model is not None:
            self._optimised_is_a_model(bound.model)
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and node.value.value is False
        ):
            for target in node.targets:
                self._freeze(target, node)
        for target in targets:
            self._bind_target(target, value, bound)

    def _freeze(self, target: ast.expr, node: ast.AST) -> None:
        """``p.requires_grad = False`` in ``for p in X.parameters():``."""
        if not (
            isinstance(target, ast.Attribute)
            and target.attr == "requires_grad"
            and isinstance(target.value, ast.Name)
        ):
            return
        parameter = target.value.id
        for loop in reversed(self.ctx.loops):
            loop_node = loop.node
            if not isinstance(loop_node, (ast.For, ast.AsyncFor)):
                continue
            owner = _parameters_of(loop_node, parameter)
            if owner is not None:
                self._record_freeze(owner, node, partial=self.ctx.branch != loop.branch)
                return

    def _record_freeze(self, owner: ast.expr, node: ast.AST, partial: bool = False) -> None:
        ctx = self.ctx
        name = ctx.dotted(owner)
        if name is not None:
            ctx.module.freezes.append(
                F.FreezeFacts(node, name, ctx.value_of(owner), ctx.function, ctx.branch, partial)
            )

    def _optimised_is_a_model(self, name: str) -> None:
        """``Adam(D.parameters())``: whatever ``D`` is, it is a model."""
        ctx = self.ctx
        target = ast.parse(name, mode="eval").body
        if ctx.kind_of(target) is None:
            ctx.bind(target, Value(F.MODULE))

    def _load_key(self, value: Value) -> None:
        if isinstance(value.node, ast.Call) and value.key is not None:
            facts = self.ctx.module.loads.get(value.node)
            if facts is not None:
                facts.keys.add(value.key)

    def _bind_target(self, target: ast.expr, value: ast.expr | None, bound: Value | None) -> None:
        ctx = self.ctx
        if isinstance(target, (ast.Name, ast.Attribute)):
            ctx.bind(target, bound)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = target.elts
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements):
                for element, item in zip(elements, value.elts, strict=False):
                    self._bind_target(element, item, ctx.value_of(item))
                return
            passed = pass_through_arguments(value)
            if passed is not None and len(passed) == len(elements):
                # `model, optimizer = accelerator.prepare(model, optimizer)`: the same objects
                for element, item in zip(elements, passed, strict=True):
                    self._bind_target(element, None, ctx.value_of(item))
                return
            parts = self._unpacked(value, bound, len(elements))
            for element, part in zip(elements, parts, strict=False):
                if isinstance(element, ast.Starred):
                    element = element.value
                self._bind_target(element, None, part)

    def _unpacked(
        self, value: ast.expr | None, bound: Value | None, count: int
    ) -> list[Value | None]:
        """What each name of ``a, b = value`` holds."""
        if bound is None:
            return [None] * count
        if bound.kind == F.OUTPUT and isinstance(value, ast.Call):
            returns = self.ctx.project.returns(bound.origin)
            if len(returns) == count:
                # `validity, label = discriminator(x)`: each element's own activation.
                return [
                    bound.but(
                        activation=item.activation,
                        activation_at=at,
                        node=bound.node,
                        flags=bound.flags | ({"model_activation"} if item.activation else set()),
                    )
                    for item, at in returns
                ]
            return [bound.but(activation=None)] * count
        if bound.kind in (F.LOADED, F.MODULE, F.LOSS, F.TENSOR):
            return [bound] * count  # `encoder, decoder = torch.load(...)`
        return [None] * count

    def _aug_assign(self, node: ast.AugAssign) -> None:
        self.children(node)
        ctx = self.ctx
        if isinstance(node.target, (ast.Name, ast.Attribute)):
            current = ctx.value_of(node.target)
            added = ctx.value_of(node.value)
            if added is not None and added.kind == F.LOSS:
                through = added.through | (current.through if current else frozenset())
                ctx.bind(node.target, Value(F.LOSS, through=through, crossing=added.crossing))
            elif current is None:
                ctx.bind(node.target, None)

    def _kind_of_annotation(self, annotation: ast.expr | None) -> str | None:
        if annotation is None:
            return None
        qualname = self.ctx.qualname(annotation)
        if qualname == "torch.optim.Optimizer":
            return F.OPTIMIZER
        if qualname == "torch.nn.Module":
            return F.MODULE
        return None

    # -- regions -------------------------------------------------------------------
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
        for arg in arguments:
            kind = self._kind_of_annotation(arg.annotation)
            if arg.arg in ctx.scopes[0].imports or any(arg.arg in s.imports for s in ctx.scopes):
                scope.imports[arg.arg] = ""  # a parameter shadows an import of the same name
            value = passed.get(arg.arg) or (None if kind is None else Value(kind))
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
        ctx.loops.append(loop)
        saved_branch = ctx.branch
        self.visit_all(node, node.body)
        ctx.loops.pop()
        ctx.branch = saved_branch
        self.visit_all(node, node.orelse)
        ctx.branch = saved_branch
        (ctx.function.loops if ctx.function else ctx.module.loops).append(loop)
        self.fire("leave_loop", loop, node)

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
            builds_model=_builds_model(ctx, qualname),
        )
        ctx.module.calls.append(event)
        self._note_load_use(event)
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

    def _note_load_use(self, event: F.CallEvent) -> None:
        """Record ``torch.load`` calls and how what they return is used."""
        loads = self.ctx.module.loads
        if event.qualname in _TORCH_LOADS:
            loads.setdefault(event.node, F.LoadFacts(event.node))
            return
        func = event.node.func
        if isinstance(func, ast.Attribute) and event.method in _MODULE_USES:
            for value in self.ctx.candidates(func.value):
                if value.kind == F.LOADED:
                    self._load_used(value, _MODULE_USES[event.method], event.node)
        elif isinstance(func, ast.Name):
            for value in self.ctx.candidates(func):
                if value.kind == F.LOADED:
                    self._load_used(value, "module", event.node)  # `rnn(x)`: a loaded module
        if event.target is not None:
            function = self.ctx.project.function(event.target)
            if function is None:
                return
            params = [p for p in function.params if p not in {"self", "cls"}]
            for param, arg in zip(params, event.node.args, strict=False):
                passed = self.ctx.value_of(arg)
                uses = function.param_uses.get(param, ())
                if (
                    passed is not None
                    and passed.kind == F.LOADED
                    and ("call" in uses or "module" in uses)
                ):
                    self._load_used(passed, "module", event.node)

    def _load_used(self, value: Value, use: str, where: ast.AST) -> None:
        if isinstance(value.node, ast.Call):
            facts = self.ctx.module.loads.get(value.node)
            if facts is not None:
                facts.uses.add(use)
                facts.where.append(where)

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
        elif else_ends and not body_ends:
            ctx.branch = (*saved, (test, polarity))
        else:
            ctx.branch = saved


_Subscriptions = tuple[tuple[tuple[type[ast.AST], str], ...], tuple[str, ...]]
_SUBSCRIPTIONS: dict[type, _Subscriptions] = {}


def _subscriptions(cls: type) -> _Subscriptions:
    """(node type, handler name) pairs and event names a rule class listens to."""
    found = _SUBSCRIPTIONS.get(cls)
    if found is None:
        found = _SUBSCRIPTIONS[cls] = _scan_subscriptions(cls)
    return found


def _scan_subscriptions(cls: type) -> _Subscriptions:
    node_types = []
    events = []
    for attribute in dir(cls):
        if attribute.startswith("visit_"):
            node_type = getattr(ast, attribute[6:], None)
            if isinstance(node_type, type):
                node_types.append((node_type, attribute))
        elif attribute in _EVENTS:
            events.append(attribute)
    return tuple(node_types), tuple(events)


_EVENTS = ("leave_loop", "leave_function", "leave_class", "leave_module")
#: Nodes without child nodes (beyond a Load/Store marker).
_LEAF_TYPES = (
    ast.Name,
    ast.Constant,
    ast.Load,
    ast.Store,
    ast.Del,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.alias,
    ast.Global,
    ast.Nonlocal,
)

_TORCH_LOADS = {"torch.load", "torch.serialization.load"}
_GLOBAL_KINDS = {F.MODULE, F.LOSS_FN, F.OPTIMIZER, F.LOADER}
_LITERALS = (
    ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
    ast.SetComp, ast.JoinedStr, ast.Lambda,
)  # fmt: skip
#: What a star import from an unindexed module most likely brought in.
_CONVENTIONAL = {
    "torch": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "optim": "torch.optim",
    "np": "numpy",
    "Variable": "torch.autograd.Variable",
}
#: Methods that show an object is an nn.Module or an optimizer, not tensors.
_MODULE_USES = {
    **dict.fromkeys(
        (
            "eval",
            "train",
            "parameters",
            "named_parameters",
            "modules",
            "children",
            "forward",
            "named_modules",
            "state_dict",
            "init_hidden",
            "initHidden",
            "apply",
            "zero_grad",
        ),
        "module",
    ),
    "step": "optimizer",
    "param_groups": "optimizer",
}

#: node type -> the fields that may hold child nodes (never ``ctx``: Load/Store
#: markers are not code, and skipping them halves the nodes the pass visits).
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_LEAVES = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)


def _builds_model(ctx: Context, qualname: str | None) -> bool:
    """A call that constructs a model: a torch.nn layer, a module class of the
    project, a torchvision constructor, ``from_pretrained``/``create_model``."""
    if qualname is None:
        return False
    last = qualname.rsplit(".", 1)[-1]
    if last in {"from_pretrained", "create_model"}:
        return True
    if qualname.startswith(("torch.", "torchvision.")):
        wrappers = {"torch.compile", "torch.jit.script"}
        return kind_from_callee(qualname) == F.MODULE and qualname not in wrappers
    if not last[:1].isupper():
        return False
    if qualname.startswith("<local>."):
        return ctx.is_module_base(ast.Name(last))
    return ctx.project.is_module_class(ctx, qualname)


def _child_fields(node: ast.AST) -> tuple[str, ...]:
    fields = []
    for name in node._fields:
        if name == "ctx":
            continue
        value = getattr(node, name, None)
        if isinstance(value, _LEAVES):
            continue  # operators are singletons without children
        if isinstance(value, (ast.AST, list)) or value is None:
            fields.append(name)
    return tuple(fields)


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


def _parameters_of(loop: ast.For | ast.AsyncFor, parameter: str) -> ast.expr | None:
    """``X`` when ``loop`` is ``for <parameter> in X.parameters():`` (or
    ``for _, <parameter> in X.named_parameters():``)."""
    target, iterated = loop.target, loop.iter
    if isinstance(target, ast.Tuple) and len(target.elts) == 2:
        target = target.elts[1]
    if not (isinstance(target, ast.Name) and target.id == parameter):
        return None
    if (
        isinstance(iterated, ast.Call)
        and isinstance(iterated.func, ast.Attribute)
        and iterated.func.attr in {"parameters", "named_parameters"}
    ):
        return iterated.func.value
    return None


def _iterated(expr: ast.expr) -> ast.expr:
    """What a ``for`` loop walks: ``loader`` in ``enumerate(tqdm(loader))``."""
    while isinstance(expr, ast.Call) and expr.args:
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name not in {"enumerate", "tqdm", "iter", "zip", "progress_bar", "track"}:
            break
        expr = expr.args[0]
    return expr
