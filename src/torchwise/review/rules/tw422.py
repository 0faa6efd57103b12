"""TW422 call-rejected-by-signature (deprecated).

The class docstring is its user documentation (`torchwise rules TW422`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._contracts import (
    Range,
    called_library_name,
    in_try_body,
    rejected_releases,
    tables,
)
from torchwise.review.rules._util import in_compat_code


@rule
class CallRejectedBySignature(Rule):
    """## What it does
    Flags a call of a torch, torchvision, torchaudio or torchtext function or
    class that passes a keyword its signature does not have, or more
    positional arguments than it takes, in releases the project says it runs
    on: `ReduceLROnPlateau(optimizer, verbose=True)` and `OneCycleLR(...,
    verbose=...)` on torch 2.7 and later, `torch.stft(..., return_complex=...)`
    on a torch older than the keyword, a keyword misspelt in every release.

    Signatures are read from each release's own sources, with what a
    `*args, **kwargs` wrapper hands its arguments to (`nn.LSTM` takes
    `RNNBase`'s parameters); a call with `*args` or `**kwargs` of its own, and
    a function that takes `**kwargs`, are not judged.

    ## Why is this bad?
    The call raises `TypeError` before doing anything, on every release the
    finding names. Keywords that a release deprecated (with a warning) and a
    later one removed break a script the day the environment is upgraded.

    ## Example
    ```python
    import torch

    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min", verbose=True)
    ```

    ## Use instead
    ```python
    import torch

    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min")
    print(scheduler.get_last_lr())  # log the rate yourself
    ```
    """

    code = "TW422"
    name = "call-rejected-by-signature"
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
        failing, judged = rejected_releases(name, span, node)
        if not failing or in_compat_code(ctx) or in_try_body(ctx, node):
            return
        problem, releases = next(iter(failing.items()))
        what = f"`{_short(name)}(...)` {problem} in {span.library} {span.describe(releases)}"
        accepted = judged & ~releases
        if accepted:
            what += f" (it does in {span.describe(accepted)})"
        else:
            what += _history(name, problem, span)
        ctx.report(self, node, what=what + ": TypeError")


def _short(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[-2:]) if len(parts) > 2 else name


def _history(name: str, problem: str, span: Range) -> str:
    """When the keyword existed outside the range (``verbose`` until 2.6)."""
    if "`" not in problem:
        return ""
    keyword = problem.split("`")[1]
    api = tables().api(name)
    if api is None:
        return ""
    had = 0
    for mask, key in api.targets:
        definition = tables().definition(key) if key else None
        if definition is None:
            continue
        for signatures_mask, overloads in definition.signatures:
            if any(signature.accepts_keyword(keyword) for signature in overloads):
                had |= signatures_mask & mask
    if not had:
        return ""
    return f" (it had `{keyword}` in {span.describe(had)})"
