"""TW113 non-strict-load-ignored (training).

The class docstring is its user documentation (`torchwise rules TW113`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_false, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    is_tensor_backward,
)


@rule
class NonStrictLoadIgnored(Rule):
    """## What it does
    Flags `load_state_dict(..., strict=False)` whose result (the missing and
    unexpected keys) is thrown away, in a training script (a file that calls
    `backward()` or has an `if __name__ == "__main__":` entry point).

    ## Why is this bad?
    `strict=False` turns every key mismatch into a silent no-op: a renamed
    layer or a `module.` prefix from `DataParallel` means the weights are simply
    not loaded and the model runs with its random initialisation.

    ## Example
    ```python
    if __name__ == "__main__":
        model.load_state_dict(state, strict=False)
    ```

    ## Use instead
    ```python
    if __name__ == "__main__":
        result = model.load_state_dict(state, strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise RuntimeError(f"checkpoint mismatch: {result}")
    ```
    """

    code = "TW113"
    name = "non-strict-load-ignored"
    family = "training"
    severity = Severity.INFO
    default_enabled = False  # real code: 3 of 5 findings true (bench/labels/precision.csv)
    message = (
        "`load_state_dict(strict=False)` result ignored: missing and unexpected keys go unnoticed"
    )

    call_methods = frozenset({"load_state_dict"})

    def __init__(self) -> None:
        self.candidates: list[ast.Call] = []
        self.is_script = False

    def visit_If(self, node: ast.If, ctx: Context) -> None:
        if ctx.function is None and "__main__" in ctx.text(node.test):
            self.is_script = True

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "load_state_dict"):
            return
        strict = keyword(node, "strict")
        if (
            strict is not None
            and is_false(strict.value)
            and isinstance(ctx.parent, ast.Expr)
            and not _partial_by_design(node)
        ):
            self.candidates.append(node)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        # Libraries load partial state on purpose (sharded loading, adapters,
        # weight averaging); the silent mismatch bites in training scripts.
        if self.is_script or any(is_tensor_backward(c) for c in module.calls):
            for node in self.candidates:
                ctx.report(self, node)


def _partial_by_design(node: ast.Call) -> bool:
    """Loads that are partial on purpose: another model's weights copied into a
    larger one (`unet.load_state_dict(teacher.state_dict(), strict=False)`),
    key-by-key assignment (`assign=True`), or a dict the code built itself."""
    if any(k.arg == "assign" for k in node.keywords):
        return True
    state = node.args[0] if node.args else None
    if isinstance(state, ast.Call) and isinstance(state.func, ast.Attribute):
        return state.func.attr == "state_dict"
    return isinstance(state, (ast.Dict, ast.DictComp))
