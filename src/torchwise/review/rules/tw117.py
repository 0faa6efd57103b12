"""TW117 discriminator-step-through-generator (training).

The class docstring is its user documentation (`torchwise rules TW117`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import is_optimizer_step, is_tensor_backward, position


@rule
class DiscriminatorStepThroughGenerator(Rule):
    """## What it does
    Flags a loss that is computed from one model's undetached output fed to a
    second model (`D(G(z))`), backpropagated, and then used to step only the
    second model's optimizer, while the first model has an optimizer of its
    own: a GAN's discriminator step that forgot `.detach()`.

    ## Why is this bad?
    `d_loss.backward()` then runs through the whole generator too: it costs a
    generator backward pass and its activations' memory every step, and it
    writes the discriminator's gradient into the generator's `.grad`. Unless
    the generator's gradients are zeroed before its own step, the generator is
    updated with a mix of both losses (pushing it to make *worse* fakes); if
    its graph was already freed by an earlier `backward()`, it raises instead.

    ## Example
    ```python
    import torch

    g_optimizer = torch.optim.Adam(G.parameters())
    d_optimizer = torch.optim.Adam(D.parameters())
    fake = G(z)
    d_loss = criterion(D(real), ones) + criterion(D(fake), zeros)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    g_optimizer = torch.optim.Adam(G.parameters())
    d_optimizer = torch.optim.Adam(D.parameters())
    fake = G(z)
    d_loss = criterion(D(real), ones) + criterion(D(fake.detach()), zeros)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    ```
    """

    code = "TW117"
    name = "discriminator-step-through-generator"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "this loss backpropagates through `{upstream}`'s undetached output into `{upstream}`, "
        "but its step only updates `{model}`: feed `{model}` a `.detach()`ed output"
    )

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._check(function.calls, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        inside = {call for function in module.functions for call in function.calls}
        self._check([call for call in module.calls if call not in inside], ctx)

    def _check(self, calls: list[F.CallEvent], ctx: Context) -> None:
        optimised = {
            value.model
            for call in calls
            for value in (call.receiver_value, _created_optimizer(call, ctx))
            if value is not None and value.kind == F.OPTIMIZER and value.model is not None
        }
        if len(optimised) < 2:
            return  # a GAN has (at least) one optimizer per model
        ordered = sorted(calls, key=lambda call: position(call.node))
        reported: set[int] = set()
        for index, backward in enumerate(ordered):
            loss = backward.receiver_value
            if not is_tensor_backward(backward) or loss is None or loss.crossing is None:
                continue
            crossing = loss.crossing
            step = next(
                (
                    call
                    for call in ordered[index + 1 :]
                    if is_optimizer_step(call) and not F.exclusive(call.branch, backward.branch)
                ),
                None,
            )
            stepped = _stepped_model(step)
            if stepped is None or stepped != crossing.model:
                continue  # the generator's own step: gradients must flow through D
            behind = sorted(model for model in crossing.upstream if model in optimised)
            node = crossing.consumer or crossing.node
            if behind and id(node) not in reported and stepped not in crossing.upstream:
                reported.add(id(node))
                ctx.report(self, node, model=stepped, upstream=behind[0])


def _created_optimizer(call: F.CallEvent, ctx: Context) -> F.Value | None:
    if call.qualname is None or not call.qualname.startswith("torch.optim."):
        return None
    return ctx.value_of(call.node)


def _stepped_model(step: F.CallEvent | None) -> str | None:
    if step is None:
        return None
    optimizer = step.receiver_value
    if optimizer is not None and optimizer.kind == F.SCALER and step.node.args:
        return None  # scaler.step(opt): the optimizer is an argument; not followed
    return None if optimizer is None else optimizer.model
