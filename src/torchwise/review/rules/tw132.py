"""TW132 legacy-data-attribute (modules).

The class docstring is its user documentation (`torchwise rules TW132`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._tensor_ops import PARAMETER_ITERATORS, weight_or_grad


@rule
class LegacyDataAttribute(Rule):
    """## What it does
    Outside `forward` and loss functions (where TW131 reports it as a bug),
    flags `.data` on parameters and gradients: `p.data` for a `p` from
    `model.parameters()`/`named_parameters()`, `module.weight.data`,
    `p.grad.data`.

    ## Why is this bad?
    `.data` is the pre-0.4 way to step outside autograd. It skips the version
    counter, so an in-place change through it to a tensor that autograd saved
    for `backward()` silently corrupts the gradients instead of raising.
    `torch.no_grad()` (or `nn.init`, or `.detach()`) says the same thing with
    the checks kept.

    ## Example
    ```python
    for p in model.parameters():
        p.data.add_(p.grad.data, alpha=-lr)
    ```

    ## Use instead
    ```python
    import torch

    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)
    ```
    """

    code = "TW132"
    name = "legacy-data-attribute"
    family = "modules"
    severity = Severity.INFO
    default_enabled = False
    message = "`{base}.data` skips autograd's checks: use `torch.no_grad()` or `.detach()`"

    def __init__(self) -> None:
        self.parameters: set[str] = set()  # loop variables over .parameters()

    def visit_For(self, node: ast.For, ctx: Context) -> None:
        it = node.iter
        if not isinstance(it, ast.Call) or not isinstance(it.func, ast.Attribute):
            return
        if it.func.attr not in PARAMETER_ITERATORS:
            return
        target = node.target
        if isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[1]  # for name, p in model.named_parameters()
        if isinstance(target, ast.Name):
            self.parameters.add(target.id)

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        if node.attr != "data" or ctx.in_forward:
            return
        base = node.value
        parameter = isinstance(base, ast.Name) and base.id in self.parameters
        if parameter or weight_or_grad(base):
            ctx.report(self, node, base=ctx.text(base))
