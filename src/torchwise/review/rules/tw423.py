"""TW423 arguments-torch-rejects (deprecated).

The class docstring is its user documentation (`torchwise rules TW423`).
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
    in_try_body,
)


@rule
class ArgumentsTorchRejects(Rule):
    """## What it does
    Flags a call whose written arguments make torch's own argument checks
    raise: `nn.Dropout(p=1.5)`, `nn.MultiheadAttention(512, 6)` ("embed_dim
    must be divisible by num_heads"), `DataLoader(ds, num_workers=0,
    prefetch_factor=2)`, `DataLoader(ds, persistent_workers=True)` without
    workers, `nn.Conv2d(3, 64, 3, groups=2)`, `ReduceLROnPlateau(opt,
    mode="maximum")`.

    The checks are the `raise`, `assert` and `torch._check` statements that
    open the function's (or the class's `__init__`'s) own source in each
    release, including the constructors it calls with its arguments
    (`TransformerEncoderLayer` builds a `MultiheadAttention`); they are
    evaluated on the literals the call writes and the defaults it leaves, and
    a check that needs anything else (a variable, a tensor) is not judged.

    ## Why is this bad?
    The line raises on every run, with the message the finding quotes: the
    script fails at start-up or, worse, the first time an evaluation or a
    rarely taken branch reaches it.

    ## Example
    ```python
    from torch import nn

    attention = nn.MultiheadAttention(embed_dim=100, num_heads=8)
    ```

    ## Use instead
    ```python
    from torch import nn

    attention = nn.MultiheadAttention(embed_dim=128, num_heads=8)
    ```
    """

    code = "TW423"
    name = "arguments-torch-rejects"
    family = "deprecated"
    severity = Severity.ERROR
    impact = "crash"
    message = "{what}"
    needs_text = ("torch",)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        found = called_library_name(node, ctx)
        if found is None:
            return
        name, span = found
        for releases, definition in definitions_in_range(name, span):
            for guard, holding, values in guards_that_hold(definition, node, releases):
                if guard.raises is None or guard.when == ["const", True]:
                    continue  # warnings: TW424/TW425; raising on every call: TW421
                if in_try_body(ctx, node, frozenset({guard.raises, "Exception", "BaseException"})):
                    return
                said = guard_text(guard, values)
                what = (
                    f'torch raises {guard.raises} on these arguments: "{said}" '
                    f"(the check in `{definition.key}`, {span.library} {span.describe(holding)})"
                )
                ctx.report(self, node, what=what)
                return
