"""TW425 deprecated-in-declared-range (deprecated).

The class docstring is its user documentation (`torchwise rules TW425`).
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
    rejected_releases,
    said_elsewhere,
)


@rule
class DeprecatedInDeclaredRange(Rule):
    """## What it does
    Flags a call of a torch, torchvision, torchaudio or torchtext callable
    that warns it is deprecated, in releases the project says it runs on:
    on every call (`torch.cuda.amp.autocast`, `F.upsample`), or for the
    arguments the call writes (a keyword a release deprecated). The message
    quotes the release's own warning, which names the replacement.

    The APIs that other TW4xx rules report with a fix (the AMP, linalg,
    upsample, weight-norm and `functorch` moves, `torch.range`, ...) are left
    to them.

    ## Why is this bad?
    It still works: a deprecation is a hint until the project's range
    reaches the release that removes it, which TW421 (a name) and TW422 (a
    keyword) then report as errors.

    ## Example
    ```python
    import torch

    compiling = torch._utils.is_compiling()
    ```

    ## Use instead
    ```python
    import torch

    compiling = torch.compiler.is_compiling()
    ```
    """

    code = "TW425"
    name = "deprecated-in-declared-range"
    family = "deprecated"
    severity = Severity.INFO
    message = "{what}"
    needs_text = ("torch",)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        found = called_library_name(node, ctx)
        if found is None or said_elsewhere(found[0]):
            return
        name, span = found
        for releases, definition in definitions_in_range(name, span):
            for deprecation in definition.deprecations:
                holding = deprecation.releases & releases
                if holding:
                    said = deprecation.message.strip().strip("…").strip()
                    quoted = f': "{said[:240]}"' if said else ""
                    where = f"{span.library} {span.describe(holding)}"
                    ctx.report(self, node, what=f"`{name}` is deprecated in {where}{quoted}")
                    return
            if rejected_releases(name, span, node)[0]:
                return  # an argument already gone in range: TW422's error says it
            for guard, holding, values in guards_that_hold(definition, node, releases):
                if guard.deprecation and guard.when != ["const", True]:
                    what = (
                        f"deprecated in {span.library} {span.describe(holding)}: "
                        f'"{guard_text(guard, values)}"'
                    )
                    ctx.report(self, node, what=what)
                    return
