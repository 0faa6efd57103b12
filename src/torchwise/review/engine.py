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
from torchwise.review.context import Context, Scope
from torchwise.review.findings import Finding, Severity
from torchwise.review.registry import Rule, all_rules

Handler = Callable[[Any, Context], None]

_NO_GRAD = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"}
_ENABLE_GRAD = {"torch.enable_grad", "torch.autograd.enable_grad"}
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>TW\d{3}(?:[\s,]+TW\d{3})*))?", re.I)
_FILE_NOQA = re.compile(
    r"^\s*#\s*torchwise:\s*noqa(?::\s*(?P<codes>TW\d{3}(?:[\s,]+TW\d{3})*))?", re.I | re.M
)


def analyse_source(
    source: str, path: str, enabled: Iterable[str], settings: Any = None
) -> list[Finding]:
    """Every finding of the ``enabled`` rules in ``source``, noqa applied, sorted."""
    enabled = frozenset(enabled)
    file_noqa = _file_suppressions(source)
    if file_noqa is not None and not file_noqa:
        return []  # "# torchwise: noqa" on its own line skips the whole file
    try:
        tree = ast.parse(source, filename=path, type_comments=False)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return [_syntax_finding(path, exc)]
    ctx = Context(path, source, settings)
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
            event: [] for event in ("leave_loop", "leave_function", "leave_module")
        }
        for rule in rules:
            for name in dir(rule):
                if name.startswith("visit_"):
                    node_type = getattr(ast, name[6:], None)
                    if node_type is not None:
                        self.handlers.setdefault(node_type, []).append(getattr(rule, name))
                elif name in self.events:
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
        }

    def run(self, tree: ast.Module) -> None:
        self.ctx.module.node = tree
        self._prescan(tree.body)
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
                if any(self.ctx.is_module_base(base) for base in statement.bases):
                    self.ctx.scopes[0].module_classes.add(statement.name)
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
        for handler in self.handlers.get(type(node), ()):
            try:
                handler(node, self.ctx)
            except RecursionError:
                raise
            except Exception as exc:  # one broken rule must not stop the review
                self.rule_failed(handler, exc, node)
        special = self.special.get(type(node))
        if special is None:
            self.children(node)
        else:
            special(node)

    def children(self, node: ast.AST) -> None:
        self.ctx.parents.append(node)
        for child in ast.iter_child_nodes(node):
            self.visit(child)
        self.ctx.parents.pop()

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
        if node.level or not node.module:
            return  # relative imports name the user's own code
        for alias in node.names:
            if alias.name != "*":
                self.ctx.bind_import(alias.asname or alias.name, f"{node.module}.{alias.name}")

    def _assign(self, node: ast.Assign | ast.AnnAssign) -> None:
        self.children(node)
        value = node.value
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        kind = None if value is None else self.ctx.kind_of(value)
        if kind is None and isinstance(node, ast.AnnAssign):
            kind = self._kind_of_annotation(node.annotation)
        for target in targets:
            if isinstance(target, (ast.Name, ast.Attribute)):
                self.ctx.set_kind(target, kind)

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
        if is_module:
            self.ctx.scopes[-1].module_classes.add(node.name)
        self.ctx.classes.append((node, is_module))
        self.ctx.scopes.append(Scope("class"))
        self.visit_all(node, node.body)
        self.ctx.scopes.pop()
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
        scope = Scope("function")
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            kind = self._kind_of_annotation(arg.annotation)
            if kind is not None:
                scope.kinds[arg.arg] = kind
        # A nested function's body does not run where it is defined: it starts
        # with no enclosing loop or no_grad of its own.
        saved = (ctx.loops, ctx.no_grad_depth)
        ctx.loops, ctx.no_grad_depth = [], int(no_grad)
        ctx.functions.append(function)
        ctx.scopes.append(scope)
        self.visit_all(node, node.body)
        ctx.scopes.pop()
        ctx.functions.pop()
        ctx.loops, ctx.no_grad_depth = saved
        ctx.module.functions.append(function)
        self.fire("leave_function", function, node)

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        ctx = self.ctx
        if isinstance(node, ast.While):
            self.visit_all(node, [node.test])
        else:
            self.visit_all(node, [node.target, node.iter])
        loop = F.LoopFacts(
            node=node, outer=ctx.loops[-1] if ctx.loops else None, function=ctx.function
        )
        ctx.loops.append(loop)
        self.visit_all(node, node.body)
        ctx.loops.pop()
        self.visit_all(node, node.orelse)
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
        saved = ctx.no_grad_depth
        for item in node.items:
            kind = self._context_kind(item.context_expr)
            if kind == "no_grad":
                ctx.no_grad_depth += 1
            elif kind == "enable_grad":
                ctx.no_grad_depth = 0
        self.visit_all(node, node.body)
        ctx.no_grad_depth = saved

    def _call(self, node: ast.Call) -> None:
        ctx = self.ctx
        func = node.func
        method = receiver = receiver_kind = None
        if isinstance(func, ast.Attribute):
            method = func.attr
            receiver = ctx.dotted(func.value)
            receiver_kind = ctx.kind_of(func.value)
        event = F.CallEvent(
            node=node,
            qualname=ctx.call_name(node),
            method=method,
            receiver=receiver,
            receiver_kind=receiver_kind,
            callee_kind=ctx.kind_of(func) if isinstance(func, (ast.Name, ast.Attribute)) else None,
            no_grad=ctx.in_no_grad,
            loop_depth=len(ctx.loops),
        )
        ctx.module.calls.append(event)
        if ctx.function is not None:
            ctx.function.calls.append(event)
        for loop in ctx.loops:
            loop.calls.append(event)
        self.children(node)
