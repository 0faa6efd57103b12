"""TW417 torchvision-pretrained-argument (deprecated).

The class docstring is its user documentation (`torchwise rules TW417`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import constant, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import in_compat_code


@rule
class TorchvisionPretrainedArgument(Rule):
    """## What it does
    Flags `pretrained=True`/`False` (and `pretrained_backbone=`) passed to a
    `torchvision.models` constructor.

    ## Why is this bad?
    torchvision 0.13 replaced the boolean with `weights=`, which names the
    exact checkpoint (`ResNet50_Weights.IMAGENET1K_V1` and `IMAGENET1K_V2` are
    different networks with different accuracy and preprocessing). The old
    argument is deprecated, warns on every call, and is slated for removal.

    ## Example
    ```python
    import torchvision

    model = torchvision.models.resnet50(pretrained=True)
    ```

    ## Use instead
    ```python
    import torchvision
    from torchvision.models import ResNet50_Weights

    model = torchvision.models.resnet50(weights=ResNet50_Weights.IMAGENET1K_V1)
    ```
    """

    code = "TW417"
    name = "torchvision-pretrained-argument"
    family = "deprecated"
    severity = Severity.INFO
    message = (
        "`{argument}=` is deprecated since torchvision 0.13: pass `weights=` "
        "(`{argument}=True` meant the `IMAGENET1K_V1` weights)"
    )

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        if not qualname.startswith("torchvision.models."):
            return
        for argument in ("pretrained", "pretrained_backbone"):
            item = keyword(node, argument)
            if item is not None and isinstance(constant(item.value), bool):
                if not in_compat_code(ctx):
                    ctx.report(self, item, argument=argument)
                return
