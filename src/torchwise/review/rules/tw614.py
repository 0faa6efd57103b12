"""TW614 flag-compared-to-none (checkpoints).

The class docstring is its user documentation (`torchwise rules TW614`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

_FLAG_ACTIONS = {"store_true": False, "store_false": True}


@rule
class FlagComparedToNone(Rule):
    """## What it does
    Flags `args.flag is None` and `args.flag is not None` (on what
    `parse_args()` returned) where this file declares `flag` with
    `action="store_true"` or `action="store_false"` (and no `default=None`).

    ## Why is this bad?
    A `store_true` flag is `False` when absent and `True` when given: never
    `None`. The test is constant, so the branch it guards always runs (`is
    not None`) or never does (`is None`), whatever the command line says.
    The intended test was the flag's truth value.

    ## Example
    ```python
    import argparse
    import os

    parser = argparse.ArgumentParser()
    parser.add_argument("--floyd", action="store_true")
    opt = parser.parse_args()
    if opt.floyd is not None:
        os.mkdir("weights")
    ```

    ## Use instead
    ```python
    import argparse
    import os

    parser = argparse.ArgumentParser()
    parser.add_argument("--floyd", action="store_true")
    opt = parser.parse_args()
    if opt.floyd:
        os.mkdir("weights")
    ```
    """

    code = "TW614"
    name = "flag-compared-to-none"
    family = "checkpoints"
    severity = Severity.ERROR
    impact = "results"
    message = (
        "`{name}` is a `{action}` flag, never None: `{test}` is always {result}, "
        "whatever the command line says; test `{truth}` instead"
    )

    def __init__(self) -> None:
        self.flags: dict[str, str] = {}  # dest -> action
        self.compares: list[tuple[ast.Compare, ast.Attribute, bool]] = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "add_argument":
            return
        keywords = {item.arg: item.value for item in node.keywords if item.arg}
        action = keywords.get("action")
        if not (isinstance(action, ast.Constant) and action.value in _FLAG_ACTIONS):
            return
        default = keywords.get("default")
        if isinstance(default, ast.Constant) and default.value is None:
            return  # None on purpose: "not given" is a third state
        dest = _dest(node, keywords.get("dest"))
        if dest is not None:
            self.flags[dest] = str(action.value)

    def visit_Compare(self, node: ast.Compare, ctx: Context) -> None:
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            return
        left, right = node.left, node.comparators[0]
        if isinstance(left, ast.Constant) and left.value is None:
            left, right = right, left
        if not (isinstance(right, ast.Constant) and right.value is None):
            return
        if isinstance(left, ast.Attribute) and _namespace(left.value, ctx):
            self.compares.append((node, left, isinstance(node.ops[0], ast.IsNot)))

    def leave_module(self, module: object, ctx: Context) -> None:
        for node, attribute, negated in self.compares:
            action = self.flags.get(attribute.attr)
            if action is None:
                continue
            name = ctx.text(attribute)
            ctx.report(
                self,
                node,
                name=name,
                action=action,
                test=ctx.text(node),
                result="true" if negated else "false",
                truth=name if negated else f"not {name}",
            )


#: Names parsed command lines go by.
_NAMESPACE_NAMES = {"args", "opt", "opts", "options", "cfg", "config", "hparams", "flags", "FLAGS"}


def _namespace(expr: ast.expr, ctx: Context) -> bool:
    """What ``parse_args()`` returned, by its value or its conventional name."""
    value = ctx.value_of(expr)
    if value is not None and value.kind == F.NAMESPACE:
        return True
    unknown = value is None or "guessed" in value.flags
    return unknown and isinstance(expr, ast.Name) and expr.id in _NAMESPACE_NAMES


def _dest(node: ast.Call, given: ast.expr | None) -> str | None:
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value
    names = [
        arg.value
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    ]
    long = [name for name in names if name.startswith("--")]
    short = [name for name in names if name.startswith("-")]
    chosen = long[0] if long else short[0] if short else None
    return None if chosen is None else chosen.lstrip("-").replace("-", "_")
