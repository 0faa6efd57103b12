"""TW302 hub-trust-repo (security).

The class docstring is its user documentation (`torchwise rules TW302`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_true, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._security import HUB_CALLS


@rule
class HubTrustRepo(Rule):
    """## What it does
    Flags `torch.hub.load`, `torch.hub.list` and `torch.hub.help` called with
    `trust_repo=True`.

    ## Why is this bad?
    Hub entry points run the repository's `hubconf.py`, arbitrary Python code
    fetched from GitHub at run time. `trust_repo=True` skips the check that asks
    before running code from a repository not seen before, so a typo in the
    repository name or a compromised repository runs silently.

    ## Example
    ```python
    import torch

    model = torch.hub.load("someone/models", "resnet18", trust_repo=True)
    ```

    ## Use instead
    ```python
    import torch

    model = torch.hub.load("someone/models", "resnet18", trust_repo="check")
    ```
    """

    code = "TW302"
    name = "hub-trust-repo"
    family = "security"
    severity = Severity.WARNING
    message = "`{callee}(trust_repo=True)` runs the repository's code without asking"

    call_names = frozenset(HUB_CALLS)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in HUB_CALLS:
            item = keyword(node, "trust_repo")
            if item is not None and is_true(item.value):
                ctx.report(self, node, callee=qualname)
