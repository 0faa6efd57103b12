"""TW002 missing-comma-in-list (syntax).

The class docstring is its user documentation (`torchwise rules TW002`).
"""

from __future__ import annotations

import ast
import io
import tokenize

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule


@rule
class MissingCommaInList(Rule):
    """## What it does
    Flags a list, tuple or set of strings in which two string literals on
    the same line are joined with no comma between them (`["xprev"
    "xstart", "epsilon"]`).

    ## Why is this bad?
    Python concatenates adjacent string literals: the collection holds
    `"xprevxstart"` and one item fewer. A `choices=` list then rejects both
    options it meant to allow, an `assert mode in [...]` fails for valid
    modes, a list of layer names silently skips two of them. Long strings
    split over several lines on purpose are not flagged.

    ## Example
    ```python
    MEAN_TYPES = ["xprev" "xstart", "epsilon"]
    ```

    ## Use instead
    ```python
    MEAN_TYPES = ["xprev", "xstart", "epsilon"]
    ```
    """

    code = "TW002"
    name = "missing-comma-in-list"
    family = "syntax"
    severity = Severity.ERROR
    impact = "results"
    message = "`{joined}` is two strings joined for want of a comma: the list holds {value}"

    def visit_List(self, node: ast.List, ctx: Context) -> None:
        self._check(node.elts, ctx)

    def visit_Tuple(self, node: ast.Tuple, ctx: Context) -> None:
        self._check(node.elts, ctx)

    def visit_Set(self, node: ast.Set, ctx: Context) -> None:
        self._check(node.elts, ctx)

    def _check(self, elements: list[ast.expr], ctx: Context) -> None:
        strings = [e for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(elements) < 2 or len(strings) != len(elements):
            return  # a collection of strings, nothing else
        for element in strings:
            if element.lineno != element.end_lineno:
                continue  # split over lines on purpose
            text = ctx.text(element)
            if _adjacent_literals(text) >= 2:
                ctx.report(self, element, joined=text, value=repr(element.value))


def _adjacent_literals(text: str) -> int:
    """How many string literals ``text`` (one expression's source) is made of."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return 1
    return sum(1 for token in tokens if token.type == tokenize.STRING)
