"""TW424 arguments-torch-warns-about (deprecated).

The class docstring is its user documentation (`torchwise rules TW424`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._contracts import (
    called_library_name,
    definitions_in_range,
    guard_text,
    guards_that_hold,
    said_elsewhere,
)


@rule
class ArgumentsTorchWarnsAbout(Rule):
    """## What it does
    Flags a call whose written arguments make torch's own source warn that
    they do not do what they say: `nn.LSTM(..., dropout=0.2)` with one layer
    ("non-zero dropout expects num_layers greater than 1": the dropout is
    never applied), and every other `warnings.warn` that opens a torch,
    torchvision, torchaudio or torchtext function on a condition of its
    arguments (deprecations are TW425).

    The checks are read from each release's own source and evaluated on the
    literals the call writes and the defaults it leaves, as TW423 does for
    the checks that raise.

    ## Why is this bad?
    torch runs the call, warns once in a log nobody reads, and ignores or
    changes the setting: the model trains without the regularisation, the
    schedule or the option the code asks for.

    ## Example
    ```python
    from torch import nn

    encoder = nn.LSTM(input_size=128, hidden_size=256, dropout=0.3)
    ```

    ## Use instead
    ```python
    from torch import nn

    encoder = nn.LSTM(input_size=128, hidden_size=256, num_layers=2, dropout=0.3)
    ```
    """

    code = "TW424"
    name = "arguments-torch-warns-about"
    family = "deprecated"
    severity = Severity.WARNING
    impact = "results"
    message = "{what}"
    needs_text = ("torch",)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        found = called_library_name(node, ctx)
        if found is None or said_elsewhere(found[0]):
            return
        name, span = found
        for releases, definition in definitions_in_range(name, span):
            for guard, holding, values in guards_that_hold(definition, node, releases):
                if guard.warns is None or guard.deprecation:
                    continue
                what = (
                    f'torch warns about these arguments: "{guard_text(guard, values)}" '
                    f"(`{definition.key}`, {span.library} {span.describe(holding)})"
                )
                ctx.report(self, node, what=what)
                return
