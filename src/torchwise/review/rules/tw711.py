"""TW711 normalize-channels-mismatch (tensors).

The class docstring is its user documentation (`torchwise rules TW711`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule

#: torchvision datasets of one-channel (grayscale) images.
_GRAYSCALE = frozenset({"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "USPS", "SEMEION"})
#: Transforms that change the channel count (or may: a Lambda).
_RECHANNELING = frozenset({"Grayscale", "Lambda", "RandomGrayscale"})


@rule
class NormalizeChannelsMismatch(Rule):
    """## What it does
    Flags a torchvision grayscale dataset (`MNIST`, `FashionMNIST`, `KMNIST`,
    `EMNIST`, `QMNIST`, `USPS`, `SEMEION`) given a transform that normalises
    three channels (`transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5,
    0.5))`) without first making three channels (`Grayscale(3)`, a `Lambda`).

    ## Why is this bad?
    `ToTensor()` gives one channel; `Normalize` subtracts a 3-channel mean in
    place and fails on the first batch: `RuntimeError: output with shape
    [1, 28, 28] doesn't match the broadcast shape [3, 28, 28]`. It usually
    comes from a CIFAR script adapted to MNIST.

    ## Example
    ```python
    import torchvision.transforms as transforms
    from torchvision import datasets

    normalize = transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    to_input = transforms.Compose([transforms.ToTensor(), normalize])
    data = datasets.MNIST("./data", transform=to_input, download=True)
    ```

    ## Use instead
    ```python
    import torchvision.transforms as transforms
    from torchvision import datasets

    to_input = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    data = datasets.MNIST("./data", transform=to_input, download=True)
    ```
    """

    code = "TW711"
    name = "normalize-channels-mismatch"
    family = "tensors"
    severity = Severity.ERROR
    impact = "crash"
    message = (
        "`{dataset}` images have one channel but `{normalize}` normalises {count}: "
        "the first batch raises"
    )
    needs_text = ("normalize",)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        if not qualname.startswith("torchvision.datasets."):
            return
        name = qualname.rsplit(".", 1)[-1]
        if name not in _GRAYSCALE:
            return
        given = next((item.value for item in node.keywords if item.arg == "transform"), None)
        compose = _compose(given, ctx) if given is not None else None
        if compose is None:
            return
        for written in compose:
            step = _held_call(written, ctx)
            if step is None:
                return  # a transform we cannot read
            step_name = (ctx.call_name(step) or "").rsplit(".", 1)[-1]
            if step_name in _RECHANNELING:
                return
            if step_name == "Normalize":
                mean = (
                    step.args[0]
                    if step.args
                    else next((item.value for item in step.keywords if item.arg == "mean"), None)
                )
                if isinstance(mean, (ast.Tuple, ast.List)) and len(mean.elts) > 1:
                    ctx.report(
                        self,
                        node,
                        dataset=name,
                        normalize=ctx.text(step),
                        count=f"{len(mean.elts)} channels",
                        normalize_line=str(step.lineno),
                    )
                return


def _compose(expr: ast.expr, ctx: Context) -> list[ast.expr] | None:
    """The steps of ``transforms.Compose([...])``, written here or bound to a name."""
    call: ast.expr | None = expr
    if not isinstance(expr, ast.Call):
        value = ctx.value_of(expr)
        call = None if value is None else value.node  # type: ignore[assignment]
    if not isinstance(call, ast.Call) or not (ctx.call_name(call) or "").endswith("Compose"):
        return None
    steps = call.args[0] if call.args else None
    return list(steps.elts) if isinstance(steps, (ast.List, ast.Tuple)) else None


def _held_call(expr: ast.expr, ctx: Context) -> ast.Call | None:
    """A transform's call, written in the list or bound to a name before it."""
    if isinstance(expr, ast.Call):
        return expr
    value = ctx.value_of(expr)
    node = None if value is None else value.node
    return node if isinstance(node, ast.Call) else None
