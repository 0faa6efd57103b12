"""TW611 argparse-flag-cannot-change (checkpoints).

The class docstring is its user documentation (`torchwise rules TW611`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule


@rule
class ArgparseFlagCannotChange(Rule):
    """## What it does
    Flags `parser.add_argument(..., action="store_true", default=True)` (and
    `store_false` with `default=False`): a flag whose default is the value
    passing it sets.

    ## Why is this bad?
    The option can never be turned off: passing the flag sets what it already
    was. An experiment run "without SBD" or "without validation" silently
    runs with it, and the results are misattributed.

    ## Example
    ```python
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--use-sbd", action="store_true", default=True)
    ```

    ## Use instead
    ```python
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--use-sbd", action=argparse.BooleanOptionalAction, default=True)
    ```
    """

    code = "TW611"
    name = "argparse-flag-cannot-change"
    family = "checkpoints"
    severity = Severity.WARNING
    impact = "results"
    message = "`{flag}` is `action='{action}'` with `default={default}`: passing it changes nothing"
    call_methods = frozenset({"add_argument"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "add_argument" or not node.args:
            return
        keywords = {item.arg: item.value for item in node.keywords if item.arg}
        action, default = keywords.get("action"), keywords.get("default")
        if not isinstance(action, ast.Constant) or not isinstance(default, ast.Constant):
            return
        same = {"store_true": True, "store_false": False}.get(str(action.value))
        if same is None or default.value is not same:
            return
        flag = node.args[0]
        ctx.report(
            self,
            node,
            flag=str(flag.value) if isinstance(flag, ast.Constant) else ctx.text(flag),
            action=str(action.value),
            default=str(default.value),
        )
