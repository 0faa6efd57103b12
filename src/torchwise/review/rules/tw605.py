"""TW605 argparse-type-bool (checkpoints).

The class docstring is its user documentation (`torchwise rules TW605`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule


@rule
class ArgparseTypeBool(Rule):
    """## What it does
    Flags `parser.add_argument(..., type=bool)`: a warning when the option
    defaults to true (it cannot be turned off from the command line), a hint
    (`info`) when it defaults to false (only an explicit `--flag False`
    misfires; `--flag True` works). An option nothing in the file reads is
    not reported.

    ## Why is this bad?
    argparse calls `bool()` on the string from the command line, and every
    non-empty string is true: `--amp False`, `--shuffle 0` and `--pretrained no`
    all give `True`. The run silently uses the opposite of the setting asked
    for, and the logged configuration says otherwise.

    ## Example
    ```python
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--pretrained", type=bool, default=False)
    args = parser.parse_args()
    print(args.pretrained)
    ```

    ## Use instead
    ```python
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--pretrained", action=argparse.BooleanOptionalAction, default=False)
    ```
    """

    code = "TW605"
    name = "argparse-type-bool"
    family = "checkpoints"
    severity = Severity.WARNING
    impact = "results"
    message = "`type=bool` makes every non-empty value true (`{flag} False` is True)"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "add_argument":
            return
        item = keyword(node, "type")
        if item is None or not (isinstance(item.value, ast.Name) and item.value.id == "bool"):
            return
        receiver = ctx.value_of(func.value)
        parser = receiver is not None and receiver.kind == F.PARSER
        if parser or ctx.qualname(ast.Name("argparse")) == "argparse":
            flag = next(
                (
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ),
                "--flag",
            )
            dest = flag.lstrip("-").replace("-", "_")
            if f".{dest}" not in ctx.source and f"'{dest}'" not in ctx.source:
                return  # never read: whatever it parses to changes nothing
            default = keyword(node, "default")
            off = default is None or (
                isinstance(default.value, ast.Constant) and not default.value.value
            )
            if off:
                message = (
                    "`type=bool` makes every non-empty value true: `{flag} False` turns it on "
                    "(it defaults to off, so only an explicit False misfires)"
                )
                ctx.report(self, item, flag=flag, message=message, severity=Severity.INFO)
                return
            message = self.message + ": defaulting to on, it can never be turned off"
            ctx.report(self, item, flag=flag, message=message)
