"""TW116 frozen-module-in-train-mode (training).

The class docstring is its user documentation (`torchwise rules TW116`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.index.project import BATCHNORM, TORCHVISION_BN
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import is_eval, is_train


@rule
class FrozenModuleInTrainMode(Rule):
    """## What it does
    Flags `model.train()` that puts a frozen module with batch norm back in
    training mode: a module whose parameters were all set to
    `requires_grad=False` (a pretrained backbone, frozen in a loop over its
    `parameters()`, by `requires_grad_(False)`, or in its class's `__init__`)
    that is never put in `.eval()` itself. Reported at the `.train()` call.

    ## Why is this bad?
    Freezing parameters does not freeze batch norm: in training mode it
    normalises with each batch's statistics and overwrites the running mean and
    variance learned on ImageNet with those of your batches. The "frozen"
    features drift every step, evaluation (which uses the running statistics)
    sees a different network than training did, and small batches make it
    worse.

    ## Example
    ```python
    import torchvision

    backbone = torchvision.models.resnet50(weights="DEFAULT")
    for p in backbone.parameters():
        p.requires_grad = False
    backbone.train()
    ```

    ## Use instead
    ```python
    import torchvision

    backbone = torchvision.models.resnet50(weights="DEFAULT")
    for p in backbone.parameters():
        p.requires_grad = False
    backbone.eval()  # keep batch norm statistics frozen too
    ```
    """

    code = "TW116"
    name = "frozen-module-in-train-mode"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "`{call}` puts frozen `{frozen}` (batch norm inside) in training mode: its running "
        "statistics keep changing; call `{frozen}.eval()` after it"
    )

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        trains = [call for call in module.calls if is_train(call) and call.receiver]
        if not trains:
            return
        evaluated = {call.receiver for call in module.calls if is_eval(call)}
        reported: set[int] = set()
        for freeze in module.freezes:  # frozen where the model is used
            if freeze.partial or freeze.owner.startswith("self.") or not _batchnorm(freeze, ctx):
                continue
            if freeze.owner in evaluated:
                continue
            for call in trains:
                receiver = call.receiver or ""
                contains = freeze.owner == receiver or freeze.owner.startswith(receiver + ".")
                if contains and id(call.node) not in reported:
                    reported.add(id(call.node))
                    ctx.report(self, call.node, call=f"{receiver}.train()", frozen=freeze.owner)
                    break
        for call in trains:  # frozen by the model's class, when it is built
            value = call.receiver_value
            klass = None if value is None else ctx.project.klass(value.origin)
            if klass is None or klass.train_override or id(call.node) in reported:
                continue
            receiver = call.receiver or ""
            frozen = [a for a in klass.frozen_batchnorm if f"{receiver}.{a}" not in evaluated]
            if frozen:
                reported.add(id(call.node))
                ctx.report(
                    self, call.node, call=f"{receiver}.train()", frozen=f"{receiver}.{frozen[0]}"
                )


def _batchnorm(freeze: F.FreezeFacts, ctx: Context) -> bool:
    value = freeze.value
    if value is None or "guessed" in value.flags:
        return False
    if "batchnorm" in value.flags:
        return True
    origin = value.origin or ""
    if TORCHVISION_BN.match(origin) or BATCHNORM.match(origin):
        return True
    klass = ctx.project.klass(value.origin)
    return klass is not None and klass.batchnorm
