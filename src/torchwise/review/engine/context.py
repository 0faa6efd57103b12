"""What rules know while the engine walks a file: resolved names, what names
hold, the branch and scopes a node sits in, and the one ``report()`` through
which findings leave.

Name resolution follows the imports the file actually wrote, pyflakes-style:
after ``import torch.nn.functional as F`` the expression ``F.softmax`` resolves
to ``torch.nn.functional.softmax``; after ``from torch.optim import AdamW`` a
call ``AdamW(...)`` resolves to ``torch.optim.AdamW``. A parameter or a local
assignment that reuses an imported name shadows it. Unresolvable names give
``None`` and rules stay silent on them: guessing is how linters get noisy.

What a name holds (:meth:`Context.value_of`) is followed through assignments,
tuple unpacking and simple reassignments, per branch: a binding made under
``if cond:`` is invisible from the ``else:`` branch. Across functions and files
the :class:`~torchwise.review.engine.view.ProjectView` answers (a class's layers, a
function's effects, the values its callers pass).
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from torchwise.findings import Finding, Fix, Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.dispatch import subtree
from torchwise.review.engine.facts import Branch, Value
from torchwise.review.engine.values import (
    INTEGER,
    SHADOWED,
    UNSET,
    UNTRACKED,
    ValueReader,
    dotted,
    kind_from_callee,
    optimised_model,
    pass_through_arguments,
)
from torchwise.review.engine.view import NO_PROJECT, ProjectView

if TYPE_CHECKING:
    from torchwise.review.settings import ReviewSettings
from torchwise.review.files import is_test_module
from torchwise.review.registry import Rule

__all__ = [
    "INTEGER",
    "UNTRACKED",
    "Binding",
    "ClassFrame",
    "Context",
    "Scope",
    "canonical",
    "kind_from_callee",
    "optimised_model",
    "pass_through_arguments",
]

# Modules re-exported under a shorter public path: resolve to the public one.
_CANONICAL_PREFIXES = (
    ("torch.nn.modules.loss.", "torch.nn."),
    ("torch.nn.modules.", "torch.nn."),
    ("torch.utils.data.dataloader.", "torch.utils.data."),
    ("torch.utils.data.dataset.", "torch.utils.data."),
    ("torch.optim.adamw.", "torch.optim."),
    ("torch.optim.adam.", "torch.optim."),
    ("torch.optim.sgd.", "torch.optim."),
)


_CANONICAL_STARTS = tuple({prefix[:12] for prefix, _ in _CANONICAL_PREFIXES})


def canonical(qualname: str) -> str:
    if not qualname.startswith(_CANONICAL_STARTS):
        return qualname  # nearly every name: one test, not one per prefix
    for prefix, public in _CANONICAL_PREFIXES:
        if qualname.startswith(prefix):
            return public + qualname[len(prefix) :]
    return qualname


@dataclass(eq=False)
class Binding:
    value: Value
    branch: Branch


@dataclass
class Scope:
    kind: str  # "module", "class", "function"
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    values: dict[str, list[Binding]] = field(default_factory=dict)  # dotted name -> bindings
    module_classes: set[str] = field(default_factory=set)  # nn.Module subclasses defined here
    classes: set[str] = field(default_factory=set)  # every class defined here
    functions: set[str] = field(default_factory=set)  # functions defined here


@dataclass(eq=False)
class ClassFrame:
    """A class being walked: its node, whether it is an nn.Module, and the
    values its methods assigned to ``self.<attr>`` (shared by every method)."""

    node: ast.ClassDef
    is_module: bool
    attributes: dict[str, Value] = field(default_factory=dict)

    def __iter__(self) -> Any:  # (node, is_module), as rules unpack it
        return iter((self.node, self.is_module))

    def __getitem__(self, index: int) -> Any:
        return (self.node, self.is_module)[index]


_Helper = TypeVar("_Helper")


class Context(ValueReader):
    """Per-file state shared by every rule during the single pass."""

    def __init__(
        self,
        path: str,
        source: str,
        settings: ReviewSettings | None,
        project: ProjectView | None = None,
    ) -> None:
        self.path = path
        self.source = source
        self.settings = settings
        self.project = project or NO_PROJECT
        self.lines = source.splitlines(keepends=True)
        self._line_starts = [0, *itertools.accumulate(map(len, self.lines))]
        self.findings: list[Finding] = []
        self.scopes: list[Scope] = [Scope("module")]
        self.parents: list[ast.AST] = []
        self.loops: list[F.LoopFacts] = []
        self.functions: list[F.FunctionFacts] = []
        self.classes: list[ClassFrame] = []
        self.no_grad_depth = 0
        self._branch: Branch = ()
        #: Conditions the code reaches only past an early exit (``if c: return``):
        #: guards, not a configuration's two ways of doing the same thing.
        self.guards: set[tuple[str, bool]] = set()
        self.module = F.ModuleFacts(node=ast.Module(body=[], type_ignores=[]))
        self._raising: list[tuple[int, int]] | None = None  # filled when first asked
        self._call_names: dict[ast.Call, str | None] = {}
        # What expressions hold, until the next binding changes what names hold.
        self._values: dict[ast.AST, Value | None] = {}
        self._helpers: dict[type, object] = {}

    @property
    def branch(self) -> Branch:
        """The ``if`` conditions the current node sits under (see facts.Branch)."""
        return self._branch

    @branch.setter
    def branch(self, branch: Branch) -> None:
        self._branch = branch
        self._values.clear()  # bindings visible from here differ

    def forget_values(self) -> None:
        """Entering or leaving a scope: what names hold must be looked up again."""
        self._values.clear()

    def forget_names(self) -> None:
        """After the prescan: names resolve again, in the order the code binds them."""
        self._values.clear()
        self._call_names.clear()

    def helper(self, kind: type[_Helper]) -> _Helper:
        """The file's one instance of a helper that several rules consult (built on
        first use, without arguments): what it tracks is tracked once per file,
        not once per rule."""
        found = self._helpers.get(kind)
        if found is None:
            found = self._helpers[kind] = kind()
        return cast(_Helper, found)

    def module_nodes(self) -> list[ast.AST]:
        """Every node of the file (``subtree`` of the module), listed once per
        file for the rules that look at the whole file at its end."""
        found = self._helpers.get(_ModuleNodes)
        if found is None:
            found = self._helpers[_ModuleNodes] = _ModuleNodes(subtree(self.module.node))
        return cast(_ModuleNodes, found).nodes

    # -- names -------------------------------------------------------------
    def bind_import(self, local: str, qualname: str) -> None:
        self.scopes[-1].imports[local] = canonical(qualname)

    def shadow(self, local: str) -> None:
        """A local name now holds something else than what an enclosing import bound."""
        scope = self.scopes[-1]
        if scope.imports.get(local) is not None or any(
            local in outer.imports for outer in self.scopes[:-1]
        ):
            scope.imports[local] = SHADOWED

    def qualname(self, expr: ast.AST) -> str | None:
        """The fully qualified name ``expr`` refers to, through the file's imports."""
        if isinstance(expr, ast.Name):
            for scope in reversed(self.scopes):
                target = scope.imports.get(expr.id)
                if target is not None:
                    return target or None
                if expr.id in scope.classes or expr.id in scope.module_classes:
                    return f"<local>.{expr.id}"
            return None
        if isinstance(expr, ast.Attribute):
            base = self.qualname(expr.value)
            return None if base is None else canonical(f"{base}.{expr.attr}")
        return None

    def call_name(self, call: ast.Call) -> str | None:
        # Every rule with a visit_Call asks this of every call: resolve once,
        # with the scopes as they are when the pass reaches the call.
        name: str | None = self._call_names.get(call, UNSET)
        if name is UNSET:
            name = self._call_names[call] = self.qualname(call.func)
        return name

    dotted = staticmethod(dotted)

    # -- values ------------------------------------------------------------
    def bind(self, target: ast.AST, value: Value | None) -> None:
        """Record what ``target`` (a name or attribute chain) holds from here on."""
        name = self.dotted(target)
        if name is None:
            return
        self._values.clear()
        if isinstance(target, ast.Name):
            self.shadow(name)
        frame = self._class_of_self(name)
        if frame is not None:
            if value is None:
                frame.attributes.pop(name[5:], None)
            else:
                frame.attributes[name[5:]] = value
            return
        scope = self.scopes[-1]
        if value is None:  # unknown: the name's conventional meaning applies again
            scope.values.pop(name, None)
            return
        bindings = scope.values.setdefault(name, [])
        # A binding on this very path replaces the ones it dominates.
        bindings[:] = [b for b in bindings if not F.implied(b.branch, self.branch)]
        bindings.append(Binding(value, self.branch))

    def _class_of_self(self, name: str) -> ClassFrame | None:
        """The class whose attribute ``self.<attr>`` names, inside its methods."""
        if not name.startswith("self.") or name.count(".") != 1 or not self.classes:
            return None
        if not self.functions or self.functions[-1].class_name != self.classes[-1].node.name:
            return None
        return self.classes[-1]

    def lookup(self, name: str) -> Value | None:
        """The value bound to a dotted name, visible from the current branch."""
        frame = self._class_of_self(name)
        if frame is not None:
            found = frame.attributes.get(name[5:])
            if found is not None:
                return found
        for scope in reversed(self.scopes):
            if scope.kind == "class" and scope is not self.scopes[-1]:
                continue  # class bodies do not enclose their methods
            bindings = scope.values.get(name)
            if bindings:
                visible = [b.value for b in bindings if not F.exclusive(b.branch, self.branch)]
                if not visible:
                    return None
                latest = visible[-1]
                if latest.kind == F.LOADED:
                    # `model = Net()` / else `model = torch.load(...)`: the restored
                    # object plays the same role, so it is most likely the same class.
                    built = [
                        v
                        for v in visible
                        if v.kind in (F.MODULE, None)
                        and v.origin
                        and not v.origin.startswith("torch")
                    ]
                    if built:
                        return built[-1]
                if len(visible) > 1 and latest.tensor is not None:
                    return _agreed_device(latest, visible)
                return latest
        return None

    def candidates(self, expr: ast.AST) -> list[Value]:
        """Every value a name may hold here: after ``if c: x = a`` / ``else: x = b``
        both reach the use (``value_of`` answers with the latest)."""
        name = self.dotted(expr)
        if name is None or self._class_of_self(name) is not None:
            value = self.value_of(expr)
            return [] if value is None else [value]
        for scope in reversed(self.scopes):
            if scope.kind == "class" and scope is not self.scopes[-1]:
                continue
            bindings = scope.values.get(name)
            if bindings:
                return [b.value for b in bindings if not F.exclusive(b.branch, self.branch)]
        return []

    def is_module_base(self, expr: ast.expr) -> bool:
        """Whether a class base is ``nn.Module`` (or a local/known subclass of it)."""
        qualname = self.qualname(expr)
        if qualname is None:
            return False
        if qualname.startswith("<local>."):
            return any(qualname[8:] in scope.module_classes for scope in self.scopes)
        if qualname.startswith("torch.nn.") or qualname in {
            "pytorch_lightning.LightningModule",
            "lightning.LightningModule",
            "lightning.pytorch.LightningModule",
        }:
            return True
        return self.project.is_module_class(self, qualname)

    # -- where we are ----------------------------------------------------------
    @property
    def parent(self) -> ast.AST | None:
        return self.parents[-1] if self.parents else None

    @property
    def function(self) -> F.FunctionFacts | None:
        return self.functions[-1] if self.functions else None

    @property
    def in_module_class(self) -> bool:
        """Directly inside a method of an nn.Module subclass."""
        function = self.function
        return function is not None and function.in_module_class

    @property
    def in_forward(self) -> bool:
        function = self.function
        return function is not None and function.in_module_class and function.name == "forward"

    @property
    def in_no_grad(self) -> bool:
        return self.no_grad_depth > 0

    # -- text ----------------------------------------------------------------
    def offset(self, line: int, byte_col: int) -> int:
        """Character offset into the file of an AST (line, UTF-8 byte column) position."""
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        col = byte_col if text.isascii() else len(text.encode()[:byte_col].decode(errors="ignore"))
        return self._line_starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def char_col(self, line: int, byte_col: int) -> int:
        return self.offset(line, byte_col) - self._line_starts[line - 1]

    # -- the one way out -------------------------------------------------------
    def _expects_raise(self, node: ast.AST) -> bool:
        """Whether ``node`` is inside a block of a test that expects an exception
        there (``with pytest.raises(...)``): the code is meant to fail."""
        if self._raising is None:
            self._raising = _raising_blocks(self.module.node)
        line = getattr(node, "lineno", 0)
        return any(start <= line <= end for start, end in self._raising)

    def report(
        self,
        rule: Rule,
        node: ast.AST,
        fix: Fix | None = None,
        message: str | None = None,
        severity: Severity | None = None,
        **fields: str,
    ) -> None:
        """Report a finding of ``rule`` at ``node``. ``severity`` may lower the
        rule's own for this finding (a hint where the evidence is weaker),
        never raise it."""
        if is_test_module(self.path) and (not rule.in_test_modules or self._expects_raise(node)):
            return
        level = rule.severity
        if severity is not None and severity.rank > level.rank:
            level = severity
        line: int = node.lineno  # type: ignore[attr-defined]
        end_line: int = node.end_lineno or line  # type: ignore[attr-defined]
        self.findings.append(
            Finding(
                code=rule.code,
                message=(message or rule.message).format(**fields),
                path=self.path,
                line=line,
                column=self.char_col(line, node.col_offset) + 1,  # type: ignore[attr-defined]
                end_line=end_line,
                end_column=self.char_col(end_line, node.end_col_offset or 0) + 1,  # type: ignore[attr-defined]
                severity=level,
                fix=fix,
                data=fields,
            )
        )


@dataclass(frozen=True)
class _ModuleNodes:
    nodes: list[ast.AST]


_RAISES = frozenset({"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})


def _raising_blocks(tree: ast.AST) -> list[tuple[int, int]]:
    """The line ranges of ``with pytest.raises(...)`` / ``self.assertRaises(...)`` blocks."""
    blocks = []
    for node in subtree(tree):
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        calls = [item.context_expr for item in node.items]
        if any(isinstance(c, ast.Call) and _called(c.func) in _RAISES for c in calls):
            blocks.append((node.lineno, node.end_lineno or node.lineno))
    return blocks


def _called(func: ast.expr) -> str:
    """``pytest.raises`` -> "raises", ``raises`` -> "raises"."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _agreed_device(latest: Value, visible: list[Value]) -> Value:
    """``latest`` with its device kept only when every binding that reaches here
    agrees on it (``if cuda: h = h.cuda()`` / ``else: h = h``: either)."""
    assert latest.tensor is not None
    place = latest.tensor.place
    if place is None:
        return latest
    for other in visible:
        if other is latest or other.tensor is None:
            continue
        if other.tensor.place is None or other.tensor.place.device != place.device:
            return latest.but(tensor=latest.tensor.but(place=None))
    return latest
