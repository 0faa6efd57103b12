"""TW304 trust-remote-code (security).

The class docstring is its user documentation (`torchwise rules TW304`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_true, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import in_test_code


@rule
class TrustRemoteCode(Rule):
    """## What it does
    Flags any call that passes `trust_remote_code=True` (Hugging Face
    `from_pretrained`, `pipeline`, `load_dataset`, ...).

    ## Why is this bad?
    `trust_remote_code=True` downloads Python files from the model or dataset
    repository and imports them: whoever controls the repository (or a later
    commit to it) runs code on your machine. Pin a reviewed `revision=` and
    prefer architectures your installed library already implements.

    ## Example
    ```python
    from transformers import AutoModel

    model = AutoModel.from_pretrained("someone/model", trust_remote_code=True)
    ```

    ## Use instead
    ```python
    from transformers import AutoModel

    model = AutoModel.from_pretrained("someone/model")
    ```
    """

    code = "TW304"
    name = "trust-remote-code"
    family = "security"
    severity = Severity.WARNING
    message = "`trust_remote_code=True` imports and runs code downloaded from the repository"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        item = keyword(node, "trust_remote_code")
        if item is not None and is_true(item.value) and not in_test_code(ctx):
            ctx.report(self, item)  # tests of remote-code loading use pinned test repositories
