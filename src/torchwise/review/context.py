"""What rules know while the engine walks a file: resolved names, scopes,
enclosing regions, and the one ``report()`` through which findings leave.

Name resolution follows the imports the file actually wrote, pyflakes-style:
after ``import torch.nn.functional as F`` the expression ``F.softmax`` resolves
to ``torch.nn.functional.softmax``; after ``from torch.optim import AdamW`` a
call ``AdamW(...)`` resolves to ``torch.optim.AdamW``. Unresolvable names give
``None`` and rules stay silent on them: guessing is how linters get noisy.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from torchwise.review import facts as F
from torchwise.review.findings import Finding, Fix
from torchwise.review.registry import Rule

# Modules re-exported under a shorter public path: resolve to the public one.
_CANONICAL_PREFIXES = (
    ("torch.nn.modules.loss.", "torch.nn."),
    ("torch.nn.modules.", "torch.nn."),
    ("torch.utils.data.dataloader.", "torch.utils.data."),
    ("torch.optim.adamw.", "torch.optim."),
    ("torch.optim.adam.", "torch.optim."),
    ("torch.optim.sgd.", "torch.optim."),
)

_LOSS_FUNCTIONS = re.compile(
    r"torch\.nn\.functional\.(\w+_loss|cross_entropy|binary_cross_entropy\w*|nll_loss|kl_div)$"
)

# Fallback kinds from conventional names, used only when no assignment told us.
_NAME_KINDS = (
    (re.compile(r"(^|_)(lr_)?sched(uler)?s?$|lr_scheduler$"), F.SCHEDULER),
    (re.compile(r"(^|_)(optim|optimizer|optimiser|opt)s?(_\w+)?$"), F.OPTIMIZER),
    (re.compile(r"(^|_)(grad_)?scaler$"), F.SCALER),
    (re.compile(r"(^|_)(criterion|loss_fn|loss_func|loss_function|lossfn)$"), F.LOSS_FN),
    (re.compile(r"(^|_)(model|net|network)$"), F.MODULE),
    (re.compile(r"(^|_)loss$"), F.LOSS),
    (re.compile(r"(^|_)(train_|val_|test_)?(data)?loader$"), F.LOADER),
)


def canonical(qualname: str) -> str:
    for prefix, public in _CANONICAL_PREFIXES:
        if qualname.startswith(prefix):
            return public + qualname[len(prefix) :]
    return qualname


def kind_from_callee(qualname: str) -> str | None:
    """The kind of value a call to ``qualname`` returns, when it is one we track."""
    last = qualname.rsplit(".", 1)[-1]
    if qualname.startswith("torch.optim.lr_scheduler.") or last in {
        "get_scheduler",
        "get_linear_schedule_with_warmup",
        "get_cosine_schedule_with_warmup",
    }:
        return F.SCHEDULER
    if qualname.startswith("torch.optim.") and last[:1].isupper():
        return F.OPTIMIZER
    if last == "GradScaler":
        return F.SCALER
    if last == "DataLoader":
        return F.LOADER
    if last == "DistributedSampler":
        return F.SAMPLER
    if _LOSS_FUNCTIONS.match(qualname):
        return F.LOSS
    if qualname.startswith("torch.nn.") and last[:1].isupper():
        return F.LOSS_FN if last.endswith("Loss") else F.MODULE
    if qualname in {"torch.compile", "torch.jit.script"}:
        return F.MODULE
    return None


@dataclass
class Scope:
    kind: str  # "module", "class", "function"
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    kinds: dict[str, str] = field(default_factory=dict)  # dotted name -> value kind
    module_classes: set[str] = field(default_factory=set)  # nn.Module subclasses defined here


class Context:
    """Per-file state shared by every rule during the single pass."""

    def __init__(self, path: str, source: str, settings: Any) -> None:
        self.path = path
        self.source = source
        self.settings = settings
        self.lines = source.splitlines(keepends=True)
        self._line_starts = [0]
        for line in self.lines:
            self._line_starts.append(self._line_starts[-1] + len(line))
        self.findings: list[Finding] = []
        self.scopes: list[Scope] = [Scope("module")]
        self.parents: list[ast.AST] = []
        self.loops: list[F.LoopFacts] = []
        self.functions: list[F.FunctionFacts] = []
        self.classes: list[tuple[ast.ClassDef, bool]] = []  # (node, is an nn.Module)
        self.no_grad_depth = 0
        self.module = F.ModuleFacts(node=ast.Module(body=[], type_ignores=[]))
        self._call_names: dict[ast.Call, str | None] = {}

    # -- names -------------------------------------------------------------
    def bind_import(self, local: str, qualname: str) -> None:
        self.scopes[-1].imports[local] = canonical(qualname)

    def qualname(self, expr: ast.AST) -> str | None:
        """The fully qualified name ``expr`` refers to, through the file's imports."""
        if isinstance(expr, ast.Name):
            for scope in reversed(self.scopes):
                target = scope.imports.get(expr.id)
                if target is not None:
                    return target
                if expr.id in scope.module_classes:
                    return f"<local>.{expr.id}"
            return None
        if isinstance(expr, ast.Attribute):
            base = self.qualname(expr.value)
            return None if base is None else canonical(f"{base}.{expr.attr}")
        return None

    def call_name(self, call: ast.Call) -> str | None:
        # Every rule with a visit_Call asks this of every call: resolve once,
        # with the scopes as they are when the pass reaches the call.
        try:
            return self._call_names[call]
        except KeyError:
            name = self._call_names[call] = self.qualname(call.func)
            return name

    @staticmethod
    def dotted(expr: ast.AST) -> str | None:
        """``self.optimizer`` for an Attribute chain of names, else None."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        parts.append(expr.id)
        return ".".join(reversed(parts))

    def set_kind(self, target: ast.AST, kind: str | None) -> None:
        name = self.dotted(target)
        if name is None:
            return
        scope = self.scopes[-1]
        if kind is None:
            scope.kinds.pop(name, None)
        else:
            scope.kinds[name] = kind

    def kind_of(self, expr: ast.AST) -> str | None:
        """What ``expr`` holds: a model, an optimizer, a loss tensor, ... or None."""
        if isinstance(expr, ast.Call):
            return self.kind_of_call(expr)
        if isinstance(expr, ast.BinOp):
            left, right = self.kind_of(expr.left), self.kind_of(expr.right)
            return F.LOSS if F.LOSS in (left, right) else None
        name = self.dotted(expr)
        if name is None:
            return None
        for scope in reversed(self.scopes):
            if name in scope.kinds:
                return scope.kinds[name]
        last = name.rsplit(".", 1)[-1]
        for pattern, kind in _NAME_KINDS:
            if pattern.search(last):
                return kind
        return None

    def kind_of_call(self, call: ast.Call) -> str | None:
        qualname = self.call_name(call)
        if qualname is not None:
            if qualname.startswith("<local>."):
                return F.MODULE if self._is_local_module_class(qualname[8:]) else None
            return kind_from_callee(qualname)
        func = call.func
        if isinstance(func, ast.Attribute):
            receiver_kind = self.kind_of(func.value)
            if receiver_kind == F.MODULE and func.attr in {
                "to", "cuda", "cpu", "train", "eval", "float", "half", "double", "bfloat16",
                "requires_grad_", "to_empty",
            }:  # fmt: skip
                return F.MODULE
            if receiver_kind == F.LOSS and func.attr in {"mean", "sum", "float", "__truediv__"}:
                return F.LOSS
            return None
        callee_kind = self.kind_of(func)
        if callee_kind == F.LOSS_FN:
            return F.LOSS
        if callee_kind == F.MODULE:
            return F.OUTPUT
        return None

    def _is_local_module_class(self, name: str) -> bool:
        return any(name in scope.module_classes for scope in self.scopes)

    def is_module_base(self, expr: ast.expr) -> bool:
        """Whether a class base is ``nn.Module`` (or a local/known subclass of it)."""
        qualname = self.qualname(expr)
        if qualname is None:
            return False
        if qualname.startswith("<local>."):
            return self._is_local_module_class(qualname[8:])
        return qualname.startswith("torch.nn.") or qualname in {
            "pytorch_lightning.LightningModule",
            "lightning.LightningModule",
            "lightning.pytorch.LightningModule",
        }

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
    def report(
        self,
        rule: Rule,
        node: ast.AST,
        fix: Fix | None = None,
        message: str | None = None,
        **fields: str,
    ) -> None:
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
                severity=rule.severity,
                fix=fix,
                data=fields,
            )
        )
