"""TW613 argparse-type-mismatch (checkpoints).

The class docstring is its user documentation (`torchwise rules TW613`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule

#: Keywords that give an option its own way of turning text into a value.
_CONVERTS = frozenset({"type", "action", "nargs", "choices", "const"})
#: Calls that turn the option's text into a number where it is read.
_CONVERSIONS = frozenset({"int", "float", "eval", "ast.literal_eval", "literal_eval"})


@rule
class ArgparseTypeMismatch(Rule):
    """## What it does
    Flags an argparse option whose value from the command line cannot be what
    its default is:

    - `type=int` with a fractional default (`default=0.1`): the default works,
      but any value given on the command line goes through `int()`, so
      `--lr 0.0003` is rejected and the option cannot be set (an error);
    - a number as default and no `type`: a value from the command line stays a
      string, so `--policy-noise 0.1` makes `args.policy_noise * max_action`
      raise `TypeError` (or `"3" * 2` silently repeat a string). Not flagged
      where every read of the option converts it (`float(args.noise)`) or
      only formats it into an f-string.

    ## Why is this bad?
    The option works only while nobody uses it. The first sweep or
    reproduction that sets it from the command line crashes, or for
    `str * int`, runs with a nonsense value.

    ## Example
    ```python
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--dropout", type=int, default=0.1)
    parser.add_argument("--policy_noise", default=0.2)
    ```

    ## Use instead
    ```python
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--policy_noise", type=float, default=0.2)
    ```
    """

    code = "TW613"
    name = "argparse-type-mismatch"
    family = "checkpoints"
    severity = Severity.ERROR
    impact = "crash"
    message = "{problem}"
    call_methods = frozenset({"add_argument"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "add_argument" or not node.args:
            return
        if not _argparse(func.value, ctx):
            return
        keywords = {item.arg: item.value for item in node.keywords if item.arg}
        if None in {item.arg for item in node.keywords}:
            return  # **kwargs: the type may be among them
        default = _number(keywords.get("default"))
        if default is None:
            return
        flag = _flag(node)
        if flag is None:
            return
        kind = keywords.get("type")
        if isinstance(kind, ast.Name) and kind.id == "int":
            if isinstance(default, float) and not default.is_integer():
                ctx.report(
                    self,
                    kind,
                    problem=f"`{flag}` is `type=int` with default {default}: a value given "
                    "on the command line goes through `int()`, so a fraction is rejected "
                    "and the option cannot be set; use `type=float`",
                )
            return
        if _CONVERTS & keywords.keys():
            return
        dest = _dest(flag, keywords.get("dest"))
        if _converted_where_read(dest, ctx):
            return
        number = "float" if isinstance(default, float) else "int"
        ctx.report(
            self,
            node,
            severity=Severity.WARNING,
            problem=f"`{flag}` has a number as default and no `type`: a value given on "
            f"the command line stays a string (`{flag} 2` gives '2'); add `type={number}`",
        )


def _argparse(parser: ast.expr, ctx: Context) -> bool:
    """A parser argparse made, or (argument groups, parsers passed in) an unknown
    receiver in a file that imports argparse; never an object known to be other."""
    value = ctx.value_of(parser)
    if value is not None and value.kind == F.PARSER:
        return True
    if value is not None and (value.kind is not None or value.origin is not None):
        return False
    return ctx.qualname(ast.Name("argparse")) == "argparse"


def _number(expr: ast.expr | None) -> int | float | None:
    """The int or float a literal default is (``0.1``, ``-1``); None otherwise."""
    sign = 1
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        sign, expr = -1, expr.operand
    if not isinstance(expr, ast.Constant) or isinstance(expr.value, bool):
        return None
    if isinstance(expr.value, (int, float)):
        return sign * expr.value
    return None


def _flag(node: ast.Call) -> str | None:
    """The option's longest name (``--policy_noise``); None for a positional."""
    names = [
        arg.value
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    ]
    options = [name for name in names if name.startswith("-")]
    return max(options, key=len) if options else None


def _dest(flag: str, given: ast.expr | None) -> str:
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value
    return flag.lstrip("-").replace("-", "_")


def _converted_where_read(dest: str, ctx: Context) -> bool:
    """Whether the file reads ``<x>.<dest>`` and every read converts it
    (``float(args.noise)``) or only formats it into text (an f-string)."""
    tree = ctx.module.node
    reads = converted = 0
    for node in subtree(tree):
        if isinstance(node, ast.Attribute) and node.attr == dest:
            reads += isinstance(node.ctx, ast.Load)
        elif isinstance(node, ast.Call) and ctx.text(node.func) in _CONVERSIONS:
            converted += sum(
                isinstance(arg, ast.Attribute) and arg.attr == dest for arg in node.args
            )
        elif isinstance(node, ast.FormattedValue):  # f"train[:{args.split}%]": '5' or 5 alike
            value = node.value
            converted += isinstance(value, ast.Attribute) and value.attr == dest
    return reads > 0 and converted == reads
