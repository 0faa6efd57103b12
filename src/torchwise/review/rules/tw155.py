"""TW155 optimizer-misses-trained-model (training).

The class docstring is its user documentation (`torchwise rules TW155`).
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule


@rule
class OptimizerMissesTrainedModel(Rule):
    """## What it does
    Flags a training loop whose loss's autograd graph reaches some models
    while every optimizer it steps updates another one: `optimizer =
    Adam(target_net.parameters())` with the loss computed by `policy_net`
    (and `target_net` only under `no_grad`).

    ## Why is this bad?
    `backward()` fills the gradients of the models the loss reaches; the
    step updates parameters that received none (the optimizer skips them, or
    applies only weight decay). The model meant to learn never changes, and
    nothing fails: the loss just does not go down, or the "trained" network
    is a copy of its initial weights. In DQN code this is the target network
    given to the optimizer instead of the policy network.

    ## Example
    ```python
    import torch
    import torch.nn.functional as F

    optimizer = torch.optim.Adam(target_net.parameters(), lr=1e-3)
    for state, action, target in batches:
        loss = F.mse_loss(policy_net(state).gather(1, action), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn.functional as F

    optimizer = torch.optim.Adam(policy_net.parameters(), lr=1e-3)
    for state, action, target in batches:
        loss = F.mse_loss(policy_net(state).gather(1, action), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """

    code = "TW155"
    name = "optimizer-misses-trained-model"
    family = "training"
    severity = Severity.ERROR
    in_test_modules = False
    message = (
        "the loss's graph reaches `{reached}`, but the optimizer stepped here updates `{stepped}`: "
        "`{reached}` gets gradients and never changes; build the optimizer on its parameters"
    )

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        backwards = [call for call in loop.calls if E.is_tensor_backward(call)]
        steps = [
            call
            for call in loop.calls
            if E.is_optimizer_step(call) and call.receiver_kind == F.OPTIMIZER
        ]
        if not backwards or not steps:
            return
        reached: set[str] = set()
        for call in backwards:
            value = call.receiver_value
            if value is None or not value.through or "guessed" in value.flags:
                return  # a loss whose graph is not known: nothing to compare
            reached |= value.through
        stepped = set()
        for call in steps:
            value = call.receiver_value
            model = None if value is None else value.model
            if model is None:
                return
            stepped.add(model)
        if any(_related(model, target) for model in stepped for target in reached):
            return
        ctx.report(
            self,
            steps[0].node,
            reached=", ".join(sorted(reached)),
            stepped=", ".join(sorted(stepped)),
        )


def _related(first: str, second: str) -> bool:
    """The same model, or one a part of the other (``model`` and ``model.head``)."""
    return first == second or first.startswith(second + ".") or second.startswith(first + ".")
