"""Numerics (TW501, TW503-TW507): compositions with a numerically stable spelling.

Registered through :mod:`torchwise.review.rules.numerics` (same family); split
out only to keep each module short. Every rule here looks at one expression
and its direct operands: ``torch.log(F.softmax(x, 1))`` is flagged, a softmax
stored in a variable and logged three lines later is not (entropy code does
that on purpose).
"""

from __future__ import annotations

import ast

from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Edit, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import rename_attribute, replace, torch_is_imported
from torchwise.review.rules.numerics import SIGMOID, SOFTMAX, producer

_LOGS = {"torch.log", "math.log", "numpy.log"}
_EXPS = {"torch.exp", "math.exp", "numpy.exp"}
_LOG_SOFTMAX_NAMES = {"softmax": "log_softmax", "Softmax": "LogSoftmax"}


def _single_argument(call: ast.Call) -> ast.expr | None:
    if len(call.args) == 1 and not call.keywords and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    return None


def _logged(node: ast.Call, ctx: Context) -> ast.expr | None:
    """``x`` of ``torch.log(x)`` or ``x.log()``."""
    if ctx.call_name(node) == "torch.log":
        return _single_argument(node)
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr != "log" or node.args or node.keywords:
        return None
    return func.value if isinstance(func.value, ast.Call) else None


def _unwrap(ctx: Context, outer: ast.Call, inner: ast.Call, rename: Edit, title: str) -> Fix:
    """Replace ``outer`` by ``inner`` with one name changed (``rename``)."""
    outer_start, outer_end = ctx.span(outer)
    inner_start, inner_end = ctx.span(inner)
    edits = (Edit(outer_start, inner_start, ""), rename, Edit(inner_end, outer_end, ""))
    return Fix(title, edits, Applicability.SAFE)


@rule
class LogOfSoftmax(Rule):
    """## What it does
    Flags `torch.log(F.softmax(x, dim))` and `x.softmax(dim).log()`.

    ## Why is this bad?
    Softmax underflows to exactly 0 for logits far below the maximum, and
    `log(0)` is `-inf`: the loss becomes infinite and gradients NaN.
    `log_softmax` computes the same values with the log-sum-exp trick and
    never underflows; it is also one kernel instead of two.

    ## Example
    ```python
    import torch
    import torch.nn.functional as F

    log_probs = torch.log(F.softmax(logits, dim=-1))
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    log_probs = F.log_softmax(logits, dim=-1)
    ```

    ## Fix safety
    Safe: `log_softmax` takes the same arguments (`dim`, `dtype`) and computes
    the same function; results differ only where the original lost precision
    (values that underflowed to `-inf` become finite). Offered when the
    softmax is spelled `F.softmax`, `torch.softmax`, `x.softmax` or
    `nn.Softmax(...)`, so the new name resolves where the old one did.
    """

    code = "TW501"
    name = "log-of-softmax"
    family = "numerics"
    severity = Severity.WARNING
    message = "`log` of a softmax underflows to -inf; use `log_softmax`"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        inner = _logged(node, ctx)
        if not isinstance(inner, ast.Call) or producer(inner, ctx) != SOFTMAX:
            return
        target = inner.func.func if isinstance(inner.func, ast.Call) else inner.func
        fix = None
        if isinstance(target, ast.Attribute) and target.attr in _LOG_SOFTMAX_NAMES:
            rename = rename_attribute(ctx, target, _LOG_SOFTMAX_NAMES[target.attr])
            fix = _unwrap(ctx, node, inner, rename, "Use `log_softmax`")
        ctx.report(self, node, fix=fix)


@rule
class LogOfSigmoid(Rule):
    """## What it does
    Flags `torch.log(torch.sigmoid(x))` and `x.sigmoid().log()`.

    ## Why is this bad?
    `sigmoid(x)` rounds to exactly 0 for `x` below about -88 in float32 (-17
    in float16), and the log of it is `-inf`. `F.logsigmoid` computes
    `-softplus(-x)`, which is exact for every `x`.

    ## Example
    ```python
    import torch

    log_p = torch.log(torch.sigmoid(scores))
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    log_p = F.logsigmoid(scores)
    ```

    ## Fix safety
    Safe: the same function without the underflow. Offered when `torch` is
    imported under its own name (the fix writes `torch.nn.functional.logsigmoid`).
    """

    code = "TW507"
    name = "log-of-sigmoid"
    family = "numerics"
    severity = Severity.WARNING
    message = "`log` of a sigmoid underflows to -inf; use `F.logsigmoid`"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        inner = _logged(node, ctx)
        if not isinstance(inner, ast.Call) or producer(inner, ctx) != SIGMOID:
            return
        argument: ast.expr | None = None
        if isinstance(inner.func, ast.Attribute) and ctx.qualname(inner.func) is None:
            argument = None if inner.args or inner.keywords else inner.func.value
        elif not isinstance(inner.func, ast.Call):
            argument = _single_argument(inner)
        fix = None
        if argument is not None and torch_is_imported(ctx):
            text = f"torch.nn.functional.logsigmoid({ctx.text(argument)})"
            fix = Fix("Use `F.logsigmoid`", (replace(ctx, node, text),), Applicability.SAFE)
        ctx.report(self, node, fix=fix)


def _is_one(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and type(node.value) in (int, float)
        and node.value == 1  # 1 or 1.0; not True
    )


@rule
class LogOnePlus(Rule):
    """## What it does
    Flags `torch.log(1 + x)` (also `math.log`, `np.log`, and `x + 1`). Off by
    default: it matters only when `x` can be tiny.

    ## Why is this bad?
    For `|x|` below the float epsilon (about 1e-7 in float32), `1 + x` rounds
    to exactly 1 and the result to 0: `log1p(x)` keeps every digit. When `x`
    is itself `exp(z)`, `log(1 + exp(z))` also overflows to `inf` for `z`
    above about 88: that is `F.softplus(z)`.

    ## Example
    ```python
    import torch

    y = torch.log(1 + rates)
    ```

    ## Use instead
    ```python
    import torch

    y = torch.log1p(rates)
    ```

    ## Fix safety
    Unsafe: `log1p` is the same function with less rounding, so results
    change in the last bits, which exact-value tests notice. No fix is offered
    for the `softplus` case.
    """

    code = "TW503"
    name = "log-one-plus"
    family = "numerics"
    severity = Severity.INFO
    default_enabled = False
    message = "`{callee}(1 + x)` loses precision for small x; use `{better}`"
    fix = Applicability.UNSAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in _LOGS:
            return
        argument = _single_argument(node)
        if not isinstance(argument, ast.BinOp) or not isinstance(argument.op, ast.Add):
            return
        if _is_one(argument.left):
            other = argument.right
        elif _is_one(argument.right):
            other = argument.left
        else:
            return
        module = qualname.rsplit(".", 1)[0]
        if isinstance(other, ast.Call) and ctx.call_name(other) in _EXPS:
            better = "F.softplus(x)" if module == "torch" else f"{module}.log1p({module}.exp(x))"
            if module == "torch":
                ctx.report(self, node, callee=qualname, better=better)
            return  # math/numpy: log1p(exp(x)) still overflows; nothing better to offer
        fix = None
        if isinstance(node.func, ast.Attribute):
            edits = (
                rename_attribute(ctx, node.func, "log1p"),
                replace(ctx, argument, ctx.text(other)),
            )
            fix = Fix("Use `log1p`", edits, Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, callee=qualname, better=f"{module}.log1p(x)")


@rule
class ExpMinusOne(Rule):
    """## What it does
    Flags `torch.exp(x) - 1` (also `math.exp`, `np.exp`). Off by default: it
    matters only when `x` can be tiny.

    ## Why is this bad?
    For small `|x|`, `exp(x)` is close to 1 and the subtraction cancels most
    significant digits (catastrophic cancellation); `expm1(x)` is accurate.

    ## Example
    ```python
    import torch

    y = torch.exp(x) - 1
    ```

    ## Use instead
    ```python
    import torch

    y = torch.expm1(x)
    ```

    ## Fix safety
    Unsafe: `expm1` is the same function with less rounding, so results
    change in the last bits, which exact-value tests notice.
    """

    code = "TW504"
    name = "exp-minus-one"
    family = "numerics"
    severity = Severity.INFO
    default_enabled = False
    message = "`{callee}(x) - 1` cancels digits for small x; use `{module}.expm1(x)`"
    fix = Applicability.UNSAFE

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> None:
        call = node.left
        if not isinstance(node.op, ast.Sub) or not _is_one(node.right):
            return
        if not isinstance(call, ast.Call) or ctx.call_name(call) not in _EXPS:
            return
        if _single_argument(call) is None:
            return
        qualname = ctx.call_name(call) or ""
        fix = None
        if isinstance(call.func, ast.Attribute):
            end = ctx.span(node)[1]
            edits = (rename_attribute(ctx, call.func, "expm1"), Edit(ctx.span(call)[1], end, ""))
            fix = Fix("Use `expm1`", edits, Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, callee=qualname, module=qualname.rsplit(".", 1)[0])


_NORMS = {"torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm", "torch.std"}


def _statistic(expr: ast.expr, ctx: Context, methods: set[str], functions: set[str]) -> str | None:
    """``norm``/``std``/``var`` when ``expr`` is a direct call of one, else None."""
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    qualname = ctx.qualname(func)
    if qualname is not None:
        return qualname.rsplit(".", 1)[-1] if qualname in functions else None
    if not isinstance(func, ast.Attribute) or func.attr not in methods:
        return None
    if ctx.dotted(func.value) in {"self", "cls"}:
        return None  # self.norm(x): a normalisation layer, not Tensor.norm
    if func.attr == "norm" and not all(
        isinstance(a, (ast.Constant, ast.UnaryOp)) for a in expr.args
    ):
        return None  # block.norm(x) is a layer; Tensor.norm's positional is the order p
    return func.attr


@rule
class DivisionByNorm(Rule):
    """## What it does
    Flags division by a norm or a standard deviation computed in place, with
    no epsilon: `x / x.norm(dim=-1, keepdim=True)`, `(x - x.mean()) / x.std()`.
    Off by default: it is a robustness hint.

    ## Why is this bad?
    An all-zero row (padding, a dead feature) has norm 0, and a constant
    batch has standard deviation 0 (a batch of one has NaN with the default
    correction): the division yields `inf`/`NaN`, which then spreads through
    the whole model. `F.normalize` clamps the norm; add an epsilon to a std.

    ## Example
    ```python
    import torch

    unit = x / x.norm(dim=-1, keepdim=True)
    z = (adv - adv.mean()) / adv.std()
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    unit = F.normalize(x, dim=-1)
    z = (adv - adv.mean()) / (adv.std() + 1e-8)
    ```
    """

    code = "TW505"
    name = "division-by-norm-without-eps"
    family = "numerics"
    severity = Severity.INFO
    default_enabled = False
    message = "division by a {statistic} with no epsilon gives inf/NaN when it is zero"

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> None:
        if isinstance(node.op, ast.Div):
            self._check(node, node.right, ctx)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        if isinstance(node.op, ast.Div):
            self._check(node, node.value, ctx)

    def _check(self, node: ast.AST, divisor: ast.expr, ctx: Context) -> None:
        statistic = _statistic(divisor, ctx, {"norm", "std"}, _NORMS)
        if statistic is not None:
            shown = "standard deviation" if statistic == "std" else "norm"
            ctx.report(self, node, statistic=shown)


@rule
class SqrtOfVariance(Rule):
    """## What it does
    Flags `torch.sqrt(x.var())` (and `torch.rsqrt`, `x.var().sqrt()`) with no
    epsilon inside. Off by default: it is a robustness hint.

    ## Why is this bad?
    The derivative of `sqrt` at 0 is infinite: when the variance is 0 (a
    constant input, a batch of one) the backward pass produces NaN, and
    `rsqrt` is infinite already in the forward pass. Normalisation layers
    compute `rsqrt(var + eps)` for this reason.

    ## Example
    ```python
    import torch

    scale = torch.sqrt(h.var(dim=-1, keepdim=True))
    ```

    ## Use instead
    ```python
    import torch

    scale = torch.sqrt(h.var(dim=-1, keepdim=True) + 1e-5)
    ```
    """

    code = "TW506"
    name = "sqrt-of-variance-without-eps"
    family = "numerics"
    severity = Severity.INFO
    default_enabled = False
    message = "`{callee}` of a variance with no epsilon: infinite gradient when it is zero"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in {"torch.sqrt", "torch.rsqrt"}:
            argument, callee = _single_argument(node), qualname
        elif (
            qualname is None
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"sqrt", "rsqrt"}
            and not node.args
        ):
            argument, callee = node.func.value, f".{node.func.attr}()"
        else:
            return
        if argument is not None and _statistic(argument, ctx, {"var"}, {"torch.var"}):
            ctx.report(self, node, callee=callee)
