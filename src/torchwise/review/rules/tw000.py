"""TW000 syntax-error (syntax).

The class docstring is its user documentation (`torchwise rules TW000`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.registry import Rule, rule


@rule
class SyntaxErrorRule(Rule):
    """## What it does
    Reports a file that Python cannot parse (a syntax error, a null byte, a
    file that is not valid UTF-8, or code nested too deeply to analyse). The
    rest of the run goes on.

    ## Why is this bad?
    Python will refuse to import the file, and no other rule can look at it,
    so every bug inside it goes unreported.

    ## Example
    ```python
    def train(model:
        pass
    ```

    ## Use instead
    ```python
    def train(model):
        pass
    ```
    """

    code = "TW000"
    name = "syntax-error"
    family = "syntax"
    severity = Severity.ERROR
    message = "file could not be parsed: {detail}"
