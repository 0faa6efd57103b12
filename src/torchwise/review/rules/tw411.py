"""TW411 checkpoint-without-use-reentrant (deprecated).

The class docstring is its user documentation (`torchwise rules TW411`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated import CHECKPOINTS
from torchwise.review.rules._util import add_keyword, in_compat_code


@rule
class CheckpointWithoutUseReentrant(Rule):
    """## What it does
    Flags `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential`
    called without `use_reentrant=`.

    ## Why is this bad?
    PyTorch warns on every such call: the implicit default (`True`, the
    reentrant variant) is slated to become an error. The reentrant variant
    also has a silent trap: when no input of the checkpointed function
    requires grad (a frozen embedding feeding it), its parameters get no
    gradient at all. `use_reentrant=False` is the recommended variant.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    h = checkpoint(block, h)
    ```

    ## Use instead
    ```python
    from torch.utils.checkpoint import checkpoint

    h = checkpoint(block, h, use_reentrant=False)
    ```

    ## Fix safety
    Unsafe: the fix passes `use_reentrant=False`, which changes how the
    backward pass recomputes the block (gradients flow where they silently
    did not before, and keyword arguments are passed through). Pass
    `use_reentrant=True` yourself to keep the old behaviour exactly.
    """

    code = "TW411"
    name = "checkpoint-without-use-reentrant"
    family = "deprecated"
    severity = Severity.INFO
    message = "`{callee}` without `use_reentrant=` warns, and its default is going away"
    fix = Applicability.UNSAFE

    call_names = frozenset(CHECKPOINTS)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in CHECKPOINTS or keyword(node, "use_reentrant"):
            return
        if has_kwargs_splat(node):
            return  # use_reentrant may be in **kwargs
        edit = add_keyword(ctx, node, "use_reentrant=False")
        fix = Fix("Pass `use_reentrant=False`", (edit,), Applicability.UNSAFE)
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, callee=qualname.rsplit(".", 1)[-1])
