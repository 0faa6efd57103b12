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
    commit to it) runs code on your machine. Without `revision=`, every run
    takes the repository's newest code: a warning. With a pinned `revision=`
    (a commit you reviewed) it is a hint: the code is that commit's. Prefer
    architectures your installed library already implements.

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
    message = (
        "`trust_remote_code=True` without a pinned `revision=` imports and runs whatever code "
        "the repository holds when this runs"
    )

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        item = keyword(node, "trust_remote_code")
        if item is None or not is_true(item.value) or in_test_code(ctx):
            return  # tests of remote-code loading use pinned test repositories
        revision = keyword(node, "revision") or keyword(node, "code_revision")
        if revision is not None and not _none(revision.value):
            ctx.report(
                self,
                item,
                message="`trust_remote_code=True` runs the repository's code at the pinned "
                "revision `{revision}`: review that commit's code",
                severity=Severity.INFO,
                revision=ctx.text(revision.value),
            )
            return
        ctx.report(self, item)


def _none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
