"""TW149 attribute-hides-method (modules).

The class docstring is its user documentation (`torchwise rules TW149`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule


@rule
class AttributeHidesMethod(Rule):
    """## What it does
    Flags `self.name = value` in a method of a class that also defines a
    method `name`, where `value` is plainly not callable: a literal, a
    comparison or arithmetic, or a parameter whose default is one
    (`def __init__(self, freeze_bn=False): self.freeze_bn = freeze_bn`).
    An error where the code calls the method (`model.freeze_bn()`), a warning
    otherwise. Properties (assignment goes through their setter) and
    callables assigned on purpose (`self.forward = self._fast_forward`) are
    not flagged.

    ## Why is this bad?
    Instance attributes win over methods: from that line on,
    `model.freeze_bn` is the flag, not the method. Calling it raises
    `TypeError: 'bool' object is not callable`; not calling it means the
    behaviour the method implements (freezing batch norm, resetting a state)
    silently never happens, while the option that asked for it is stored.

    ## Example
    ```python
    from torch import nn

    class DeepLab(nn.Module):
        def __init__(self, freeze_bn=False):
            super().__init__()
            self.freeze_bn = freeze_bn

        def freeze_bn(self):
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()
    ```

    ## Use instead
    ```python
    from torch import nn

    class DeepLab(nn.Module):
        def __init__(self, freeze_bn=False):
            super().__init__()
            self.freeze_bn_enabled = freeze_bn

        def freeze_bn(self):
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()
    ```
    """

    code = "TW149"
    name = "attribute-hides-method"
    family = "modules"
    severity = Severity.ERROR
    impact = "results"
    message = (
        "`self.{name} = {value}` hides the method `{name}()` (line {method_line}): "
        "`.{name}` is {what} from here on{called}; rename the attribute"
    )

    def __init__(self) -> None:
        #: id of each class node -> its methods (properties left out), computed once
        self.methods: dict[int, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.called: set[str] | None = None  # computed once, when something hides a method

    def visit_Assign(self, statement: ast.Assign, ctx: Context) -> None:
        if len(statement.targets) != 1 or not ctx.classes:
            return
        target = statement.targets[0]
        if not (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            return
        klass = ctx.classes[-1].node
        method = next((f for f in ctx.functions if f.class_name == klass.name), None)
        if method is None or not isinstance(method.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        methods = self._methods_of(klass)
        name = target.attr
        if name not in methods:
            return
        what = _plain_value(statement.value, _constant_defaults(method.node))
        if what is None:
            return
        if self.called is None:
            self.called = _called_methods(ctx.module.node)
        is_called = name in self.called
        ctx.report(
            self,
            statement,
            severity=None if is_called else Severity.WARNING,
            name=name,
            value=ctx.text(statement.value),
            method_line=str(methods[name].lineno),
            what=what,
            called=": calling it raises TypeError" if is_called else "",
        )

    def _methods_of(self, klass: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        if id(klass) not in self.methods:
            self.methods[id(klass)] = {
                item.name: item
                for item in klass.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and not _is_property(item)
            }
        return self.methods[id(klass)]


def _is_property(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in function.decorator_list:
        text = ast.unparse(decorator)
        if text in {"property", "functools.cached_property", "cached_property"}:
            return True
        if text.endswith((".setter", ".getter", ".deleter")):
            return True
    return False


def _constant_defaults(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, object]:
    """Parameters whose default is a literal: ``freeze_bn=False`` -> False."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
    return {
        arg.arg: default.value
        for arg, default in pairs
        if isinstance(default, ast.Constant) and default.value is not None
    }


def _plain_value(value: ast.expr, constants: dict[str, object]) -> str | None:
    """What the value plainly is when it cannot be callable; None otherwise."""
    if isinstance(value, ast.Constant) and value.value is not None:
        return _a(type(value.value).__name__)
    if isinstance(value, (ast.Compare, ast.BinOp, ast.BoolOp, ast.UnaryOp)):
        return "a value, not a function"
    if isinstance(value, (ast.List, ast.Dict, ast.Tuple, ast.Set)):
        return _a(type(value).__name__.lower())
    if isinstance(value, ast.Name) and value.id in constants:
        return f"{_a(type(constants[value.id]).__name__)} (the parameter `{value.id}`)"
    return None


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def _called_methods(tree: ast.AST) -> set[str]:
    """Attribute names the file calls: ``x.name(...)``."""
    return {
        node.func.attr
        for node in subtree(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
