"""TW415 moved-api (deprecated).

The class docstring is its user documentation (`torchwise rules TW415`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated_moved import MOVED
from torchwise.review.rules._util import in_compat_code, replace_fix, torch_is_imported


@rule
class MovedApi(Rule):
    """## What it does
    Flags APIs PyTorch moved and deprecated at the old place:
    `functorch.vmap`/`grad`/`jacrev`/... (now `torch.func`),
    `torch.backends.cuda.sdp_kernel` (now `torch.nn.attention.sdpa_kernel`)
    and `torch.utils._pytree._register_pytree_node`.

    ## Why is this bad?
    The old entry points warn on every call and are being removed; the
    `functorch` package in particular is a compatibility shim over `torch.func`.

    ## Example
    ```python
    import functorch

    per_sample = functorch.vmap(loss_fn)
    ```

    ## Use instead
    ```python
    import torch

    per_sample = torch.func.vmap(loss_fn)
    ```

    ## Fix safety
    Safe for `functorch.<name>` written with the module prefix and `torch`
    imported: the shim forwards every argument to `torch.func.<name>`.
    `sdpa_kernel` takes different arguments and `register_pytree_node`
    different keywords, so those get no fix.
    """

    code = "TW415"
    name = "moved-api"
    family = "deprecated"
    severity = Severity.INFO
    message = "`{old}` is deprecated; use `{new}`"
    fix = Applicability.SAFE

    call_names = frozenset(MOVED)

    def __init__(self) -> None:
        # Names bound by `except ImportError: from functorch import vmap`: the
        # fallback; the name holds `torch.func.vmap` wherever torch is recent.
        self.fallbacks: set[str] = set()

    def visit_ImportFrom(self, node: ast.ImportFrom, ctx: Context) -> None:
        if (node.module or "").startswith("functorch") and in_compat_code(ctx):
            self.fallbacks |= {alias.asname or alias.name for alias in node.names}

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        new = MOVED.get(qualname)
        if new is None:
            return
        if isinstance(node.func, ast.Name) and node.func.id in self.fallbacks:
            return
        fix = None
        func = node.func
        prefixed = isinstance(func, ast.Attribute) and ctx.qualname(func.value) == "functorch"
        if new.startswith("torch.func.") and prefixed and torch_is_imported(ctx):
            fix = replace_fix(ctx, func, new, f"Use `{new}`")
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, old=qualname, new=new)
