"""Numerics (TW127, TW128, TW5xx): losses fed the wrong thing, unstable compositions.

The loss rules need to know what a name holds: ``probs = F.softmax(logits, 1)``
then ``criterion(probs, y)``. :class:`_Values` remembers, per function, names
assigned from softmax/sigmoid and the loss module a name was built from, and
answers only when the assignment dominates the use (it sits earlier in the
same statement list as the statement that holds the use), so a softmax in one
branch does not taint the other.
"""

from __future__ import annotations

import abc
import ast
from typing import Any

from torchwise.findings import Applicability, Fix
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule
from torchwise.review.rules._util import rename_attribute, replace

SOFTMAX, SIGMOID = "softmax", "sigmoid"
_PRODUCERS = {
    "torch.nn.functional.softmax": SOFTMAX,
    "torch.softmax": SOFTMAX,
    "torch.special.softmax": SOFTMAX,
    "torch.sigmoid": SIGMOID,
    "torch.nn.functional.sigmoid": SIGMOID,
    "torch.special.expit": SIGMOID,
}
_PRODUCER_MODULES = {"torch.nn.Softmax": SOFTMAX, "torch.nn.Sigmoid": SIGMOID}
# loss -> (what it expects, the producer that is wrong for it)
CE, NLL, BCE = "cross_entropy", "nll_loss", "binary_cross_entropy"
BCE_LOGITS = "binary_cross_entropy_with_logits"
_LOSS_FUNCTIONS = {
    "torch.nn.functional.cross_entropy": CE,
    "torch.nn.functional.nll_loss": NLL,
    "torch.nn.functional.binary_cross_entropy": BCE,
    "torch.nn.functional.binary_cross_entropy_with_logits": BCE_LOGITS,
}
_LOSS_MODULES = {
    "torch.nn.CrossEntropyLoss": CE,
    "torch.nn.NLLLoss": NLL,
    "torch.nn.BCELoss": BCE,
    "torch.nn.BCEWithLogitsLoss": BCE_LOGITS,
}
_AMBIGUOUS = "?"


def producer(call: ast.expr, ctx: Context) -> str | None:
    """SOFTMAX/SIGMOID when ``call`` is ``F.softmax(...)``, ``x.softmax(...)``, ..."""
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    qualname = ctx.qualname(func)
    if qualname is not None:
        return _PRODUCERS.get(qualname)
    if isinstance(func, ast.Attribute) and func.attr in (SOFTMAX, SIGMOID):
        # A method on a value (``logits.softmax(-1)``), not an unresolved module function.
        return func.attr if ctx.qualname(func.value) is None else None
    if isinstance(func, ast.Call):  # nn.Softmax(dim=1)(x)
        return _PRODUCER_MODULES.get(ctx.call_name(func) or "")
    return None


def _statement_lists(container: ast.AST) -> list[list[ast.stmt]]:
    return [
        value
        for name in ("body", "orelse", "finalbody")
        if isinstance(value := getattr(container, name, None), list)
    ]


#: (loss, prediction, what the prediction holds) of a call that computes a loss.
LossFed = tuple[str, ast.expr, str | None]


class _Values:
    """Per-function memory of names holding softmax/sigmoid output or a loss module.

    One per file, shared by the loss rules (``ctx.helper(_Values)``): each rule
    hands it every assignment and call, and it acts on each once."""

    def __init__(self) -> None:
        # (scope id, dotted name) -> (kind, container, statement list, index)
        self.tensors: dict[tuple[int, str], tuple[str, ast.AST, list[ast.stmt], int]] = {}
        self.losses: dict[tuple[int, str], str] = {}
        self._assigned: ast.stmt | None = None  # the statement last tracked
        self._fed: tuple[ast.Call, LossFed | None] | None = None  # the call last asked of

    def track(self, statement: ast.Assign | ast.AnnAssign | ast.AugAssign, ctx: Context) -> None:
        """:meth:`assign`, once per statement however many rules hand it over."""
        if statement is not self._assigned:
            self._assigned = statement
            self.assign(statement, ctx)

    def loss_fed(self, call: ast.Call, ctx: Context) -> LossFed | None:
        """What feeds ``call`` when it computes a loss; then ``x.log_()`` and the
        like forget what ``x`` held. Worked out once per call."""
        if self._fed is not None and self._fed[0] is call:
            return self._fed[1]
        found: LossFed | None = None
        loss = self.loss_of(call, ctx) or _loss_of_value(call, ctx)
        if loss is not None:
            prediction = loss_input(call)
            if prediction is not None:
                found = (loss, prediction, self.tensor_kind(prediction, ctx))
        self.forget_in_place(call, ctx)
        self._fed = (call, found)
        return found

    @staticmethod
    def _scope(name: str, ctx: Context) -> int:
        if name.startswith("self.") and ctx.classes:
            return id(ctx.classes[-1][0])  # an attribute lives as long as its object
        return id(ctx.function.node) if ctx.function else 0

    def assign(self, statement: ast.Assign | ast.AnnAssign | ast.AugAssign, ctx: Context) -> None:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        value = statement.value if not isinstance(statement, ast.AugAssign) else None
        single = len(targets) == 1 and value is not None
        for target in targets:
            names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            for item in names:
                name = ctx.dotted(item)
                if name is not None:
                    self._bind(name, value if single and item is target else None, statement, ctx)

    def _bind(self, name: str, value: ast.expr | None, statement: ast.stmt, ctx: Context) -> None:
        key = (self._scope(name, ctx), name)
        self.tensors.pop(key, None)
        if value is None:
            self.losses.pop(key, None)
            return
        kind = producer(value, ctx)
        container = ctx.parent
        if kind is not None and container is not None:
            for statements in _statement_lists(container):
                index = next((i for i, s in enumerate(statements) if s is statement), -1)
                if index >= 0:
                    self.tensors[key] = (kind, container, statements, index)
        loss = (
            _LOSS_MODULES.get(ctx.call_name(value) or "") if isinstance(value, ast.Call) else None
        )
        if loss is not None:
            previous = self.losses.get(key)
            self.losses[key] = loss if previous in (None, loss) else _AMBIGUOUS

    def tensor_kind(self, expr: ast.expr, ctx: Context) -> str | None:
        """What ``expr`` holds: a direct producer call, or a name one dominates."""
        direct = producer(expr, ctx)
        if direct is not None:
            return direct
        name = ctx.dotted(expr)
        if name is None:
            return None
        entry = self.tensors.get((self._scope(name, ctx), name))
        if entry is None:
            return None
        kind, container, statements, index = entry
        parents = ctx.parents
        for depth, parent in enumerate(parents[:-1]):
            if parent is container:
                child = parents[depth + 1]
                later = statements[index + 1 :]
                return kind if any(s is child for s in later) else None
        return None

    def loss_of(self, call: ast.Call, ctx: Context) -> str | None:
        """Which loss ``call`` computes: ``F.cross_entropy``, ``criterion(...)``, ..."""
        qualname = ctx.call_name(call)
        if qualname is not None:
            return _LOSS_FUNCTIONS.get(qualname)
        func = call.func
        if isinstance(func, ast.Call):  # nn.CrossEntropyLoss()(out, y)
            return _LOSS_MODULES.get(ctx.call_name(func) or "")
        name = ctx.dotted(func)
        if name is None:
            return None
        loss = self.losses.get((self._scope(name, ctx), name))
        return None if loss == _AMBIGUOUS else loss

    def forget_in_place(self, call: ast.Call, ctx: Context) -> None:
        """``probs.log_()`` changes what the name holds."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr.endswith("_"):
            name = ctx.dotted(func.value)
            if name is not None:
                self.tensors.pop((self._scope(name, ctx), name), None)


def loss_input(call: ast.Call) -> ast.expr | None:
    """The prediction argument of a loss call (first positional or ``input=``)."""
    if call.args:
        first = call.args[0]
        return None if isinstance(first, ast.Starred) else first
    item = keyword(call, "input")
    return None if item is None else item.value


class _LayersFeedingLosses:
    """Per file: (rule code, line of a model's output activation, the loss, the
    activation) -> the lines of the losses it feeds."""

    def __init__(self) -> None:
        self.losses: dict[tuple[str, int, str, str], list[int]] = {}


class LossInputRule(Rule, abc.ABC):
    """Shared handlers: track assignments, then check each loss call's input."""

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        ctx.helper(_Values).track(node, ctx)

    def visit_AnnAssign(self, node: ast.AnnAssign, ctx: Context) -> None:
        ctx.helper(_Values).track(node, ctx)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        ctx.helper(_Values).track(node, ctx)

    #: Also follow activations that a model's output ends in (another class, another file).
    follows_models = False

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        fed = ctx.helper(_Values).loss_fed(node, ctx)
        if fed is None:
            return
        loss, prediction, given = fed
        if given is not None:
            self.check(node, loss, given, ctx)
        elif self.follows_models:
            self._from_model(node, loss, prediction, ctx)

    def _from_model(self, node: ast.Call, loss: str, prediction: ast.expr, ctx: Context) -> None:
        value = ctx.value_of(prediction)
        if value is None or value.kind != F.OUTPUT or "model_activation" not in value.flags:
            return
        if value.activation is None:
            return
        at = value.activation_at
        if at is not None and at[0] is None:
            # The layer is in this file: report where the fix belongs, the layer,
            # once, naming every loss it feeds (at the end of the module).
            key = (self.code, at[1], loss, value.activation)
            ctx.helper(_LayersFeedingLosses).losses.setdefault(key, []).append(node.lineno)
            return
        place = "" if at is None else f" at {at[0]}:{at[1]}"
        note = f" (the model's output ends in it{place})"
        self.check(node, loss, value.activation, ctx, note)

    def leave_module(self, module: Any, ctx: Context) -> None:
        fed = ctx.helper(_LayersFeedingLosses).losses
        for (code, line, loss, activation), lines in sorted(fed.items()):
            if code != self.code:
                continue
            where = "line" if len(lines) == 1 else "lines"
            listed = ", ".join(str(n) for n in sorted(set(lines)))
            note = f" (the model's output ends in it; the loss is at {where} {listed})"
            self.check(_line_marker(ctx, line), loss, activation, ctx, note)

    @abc.abstractmethod
    def check(
        self, call: ast.AST, loss: str, given: str | None, ctx: Context, note: str = ""
    ) -> None:
        """Report when ``given`` (what fed the loss) is wrong for ``loss``."""


def _loss_of_value(call: ast.Call, ctx: Context) -> str | None:
    """The loss a call computes, when the callee is a loss module known to the
    engine (built in another function: ``self.criterion = nn.CrossEntropyLoss()``)."""
    func = call.func
    if not isinstance(func, (ast.Name, ast.Attribute)):
        return None
    value = ctx.value_of(func)
    if value is None or value.kind != F.LOSS_FN or value.origin is None:
        return None
    return _LOSS_MODULES.get(value.origin)


def _line_marker(ctx: Context, line: int) -> ast.AST:
    text = ctx.lines[line - 1] if 0 < line <= len(ctx.lines) else ""
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip("\r\n"))
    return ast.Pass(lineno=line, col_offset=start, end_lineno=line, end_col_offset=end)


def bce_fix(call: ast.Call, ctx: Context) -> Fix | None:
    func, sigmoid = call.func, loss_input(call)
    if not (
        isinstance(func, ast.Attribute)
        and call.args
        and sigmoid is call.args[0]
        and isinstance(sigmoid, ast.Call)
        and len(call.args) <= 3  # input, target, weight
        and all(k.arg in {"target", "weight", "reduction"} for k in call.keywords)
    ):
        return None
    logits = _sigmoid_argument(sigmoid, ctx)
    if logits is None:
        return None
    edits = (
        rename_attribute(ctx, func, "binary_cross_entropy_with_logits"),
        replace(ctx, sigmoid, ctx.text(logits)),
    )
    return Fix("Use `binary_cross_entropy_with_logits` on the logits", edits, Applicability.UNSAFE)


def _sigmoid_argument(sigmoid: ast.Call, ctx: Context) -> ast.expr | None:
    """``z`` of ``torch.sigmoid(z)`` or ``z.sigmoid()``, when that is all the call does."""
    if sigmoid.keywords:
        return None
    if ctx.qualname(sigmoid.func) in _PRODUCERS:
        if len(sigmoid.args) == 1 and not isinstance(sigmoid.args[0], ast.Starred):
            return sigmoid.args[0]
        return None
    if isinstance(sigmoid.func, ast.Attribute) and not sigmoid.args:
        return sigmoid.func.value
    return None


SOFTMAX_FAMILY = {
    "torch.nn.functional.softmax": 1,
    "torch.nn.functional.log_softmax": 1,
    "torch.nn.functional.softmin": 1,
    "torch.softmax": 1,
    "torch.log_softmax": 1,
    "torch.nn.Softmax": 0,
    "torch.nn.LogSoftmax": 0,
    "torch.nn.Softmin": 0,
}
