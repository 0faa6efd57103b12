"""Training loop (TWR1xx)."""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.run.catalog import check


@check("TWR101", "gradients-accumulate-across-steps", Severity.ERROR)
class GradientsAccumulate:
    """A backward adds to gradients an optimizer step already used, and the next step applies both.

    ## What it does
    Flags the `backward()` that adds new gradients to the `.grad` an optimizer
    step has already consumed, when the next step then uses the sum: nothing
    set the gradients to None or zeroed them between the step and that
    backward. It watches the gradient tensors themselves, so it sees through
    `model.zero_grad()`, `optimizer.zero_grad()`, `p.grad = None` and
    `p.grad.zero_()` alike. Gradient accumulation (several backwards, then one
    step, then `zero_grad`) is not flagged, nor is a GAN generator's backward
    that reaches the discriminator, when the discriminator zeroes its
    gradients before its own next step.

    ## Why is this bad?
    Each step applies the sum of all gradients so far: the effective learning
    rate grows with every step and training diverges or stalls, often without
    an error. Review rule TW101 finds the missing call in the source; this
    check proves the accumulation happens.

    ## Example
    ```python
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    accumulate = 4  # deliberate accumulation: one step every four batches
    for step in range(12):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y) / accumulate
        loss.backward()
        if (step + 1) % accumulate == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```
    """


@check("TWR102", "parameter-without-gradient", Severity.WARNING)
class ParameterWithoutGradient:
    """Parameters an optimizer holds never get a gradient, although their module runs.

    ## What it does
    After the run, lists the parameters an optimizer stepped over that never
    received a gradient, grouped by module, at the line that calls that
    module. It then replays the last training forward with that module's
    output perturbed: if the model's output moves, the module feeds the loss
    and its gradient is cut on the way (`.detach()`, `.data`, `.numpy()` and
    back), which is reported as a warning. A module whose output the loss never
    uses, one that ran only under `torch.no_grad()` (a deliberate freeze), or one
    that never ran is reported as a hint.

    ## Why is this bad?
    Those layers keep their initial weights: the model trains with part of
    itself frozen by accident, and the loss still decreases, so nothing looks
    wrong.

    ## Example
    ```python
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(4, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            features = self.encoder(x).detach()
            return self.head(features)


    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(4, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            features = self.encoder(x)
            return self.head(features)


    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR103", "parameter-not-optimized", Severity.ERROR)
class ParameterNotOptimized:
    """Parameters get gradients at every step, but no optimizer updates them.

    ## What it does
    After the run, finds parameters of the trained model that received
    gradients but belong to no optimizer that stepped. It is an error when the
    optimizer holds parameters the model no longer has: a layer was replaced
    after the optimizer was built, so the optimizer updates the old layer and
    the new one never changes. It is an error too when none of the parameters the
    optimizers hold ever gets a gradient while the model's do: the optimizer was
    built on another network (a DQN's target network instead of its policy
    network), so nothing that trains is ever updated. It is a warning when only
    some parameters of a layer are optimized, when the layer runs after
    optimized layers (a head or decoder left out), or when leading layers are
    left out that nothing loaded weights into (no `load_state_dict`, not a
    library's pretrained model): they stay random while the rest trains on
    their output (a VAE's encoder left out of the optimizer). Leading layers
    with loaded weights are a hint: a backbone meant to stay frozen, whose
    gradients `requires_grad_(False)` would skip.

    ## Why is this bad?
    Part of the model never trains although its gradients are computed at
    every step, and the loss curve does not say so.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model[2] = nn.Linear(8, 3)  # a new head, after the optimizer was built
    for step in range(4):
        x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    model[2] = nn.Linear(8, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR104", "frozen-parameter-updated", Severity.ERROR)
class FrozenParameterUpdated:
    """An optimizer step changes parameters whose `requires_grad` is False.

    ## What it does
    Compares the frozen parameters an optimizer holds before and after each of
    its first steps and reports a step that changed them. It happens when a
    frozen parameter keeps a gradient tensor (zeroed with
    `zero_grad(set_to_none=False)`, or left from before it was frozen): SGD's
    momentum, Adam's running averages and weight decay keep moving it.

    ## Why is this bad?
    The layer you froze (a pretrained backbone) drifts anyway, slowly enough
    to go unnoticed, and the "frozen" model you evaluate is not the one you
    meant to keep.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(6):
        if step == 2:  # freeze the first layer from now on
            model[0].requires_grad_(False)
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(6):
        if step == 2:  # freeze the first layer: a new optimizer without it
            model[0].requires_grad_(False)
            trainable = [p for p in model.parameters() if p.requires_grad]
            optimizer = torch.optim.SGD(trainable, lr=0.1, momentum=0.9)
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR105", "scheduler-before-optimizer", Severity.WARNING)
class SchedulerBeforeOptimizer:
    """A learning-rate scheduler steps before the optimizer's first step.

    ## What it does
    Reports the first `scheduler.step()` of a scheduler when its optimizer has
    not stepped yet. A GradScaler step that skipped the optimizer (inf
    gradients in the first fp16 steps) counts as a step, so mixed precision
    does not raise a false alarm.

    ## Why is this bad?
    Since PyTorch 1.1 the scheduler must step after the optimizer: calling it
    first skips the first value of the schedule (the warm-up's first learning
    rate, or a whole epoch at the initial rate).

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for epoch in range(2):
        scheduler.step()
        for step in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for epoch in range(2):
        for step in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
    ```
    """


@check("TWR106", "clipping-scaled-gradients", Severity.ERROR)
class ClippingScaledGradients:
    """Gradient clipping runs on gradients a GradScaler scaled and did not unscale.

    ## What it does
    Reports `clip_grad_norm_` or `clip_grad_value_` called after
    `scaler.scale(loss).backward()` and before `scaler.unscale_(optimizer)`
    for an optimizer that holds the clipped parameters. It judges the calls,
    so it fires on a CPU machine too, where `torch.cuda.amp.GradScaler()`
    disables itself, for the script that will run on a GPU.

    ## Why is this bad?
    The gradients are multiplied by the loss scale (65536 at first): a norm of
    1.0 clips them to almost nothing, so training crawls, and the scale changes
    over time, so the effective clipping threshold changes too.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```
    """


@check("TWR107", "scaler-step-without-update", Severity.ERROR)
class ScalerStepWithoutUpdate:
    """`scaler.step(optimizer)` runs twice for one optimizer with no `scaler.update()` between.

    ## What it does
    Reports the second `scaler.step` for an optimizer when `scaler.update()`
    was not called after the first, judged from the calls, so the bug shows on
    a CPU machine where the scaler is disabled.

    ## Why is this bad?
    On a GPU the second call raises `step() has already been called since the
    last update()`; and without `update()` the loss scale never adapts, so
    fp16 gradients overflow or underflow.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```
    """


@check("TWR108", "optimizer-step-bypasses-scaler", Severity.ERROR)
class OptimizerStepBypassesScaler:
    """`optimizer.step()` is called directly on gradients a GradScaler scaled.

    ## What it does
    Reports an `optimizer.step()` that runs after `scaler.scale(loss).backward()`
    without going through `scaler.step(optimizer)`, for an optimizer the
    scaler never stepped, judged from the calls.

    ## Why is this bad?
    The step applies gradients multiplied by the loss scale (65536 at first):
    the first update destroys the weights, and steps with inf gradients are not
    skipped.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        optimizer.step()
        scaler.update()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```
    """


@check("TWR109", "graph-kept-alive", Severity.WARNING)
class GraphKeptAlive:
    """A variable accumulates losses or outputs with their autograd graphs across iterations.

    ## What it does
    After each of the first optimizer steps, and after each evaluation pass,
    follows the tensors the user's frames hold (locals, lists and dicts of
    them, attributes of `self`) into their autograd graphs. A variable whose
    graph reaches the losses of two different steps, or the outputs of two
    evaluation batches, is reported at the line that accumulates it, with the
    number of graphs it holds.

    ## Why is this bad?
    `total_loss += loss` keeps every step's graph alive through
    `total_loss.grad_fn`: memory grows with every iteration until the job runs
    out of it, hours in. Review rule TW106 looks for the pattern; this check
    measures it.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total_loss = 0
    for step in range(5):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total_loss = 0.0
    for step in range(5):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    ```
    """


@check("TWR110", "non-finite-loss", Severity.ERROR)
class NonFiniteLoss:
    """The loss becomes NaN or inf; reported with the first operation that produced it.

    ## What it does
    Checks the loss of every `backward()`. At the first non-finite one it says
    why: parameters already non-finite (an earlier step made them so), a batch
    that contains NaN or inf, or the first operation that produced a
    non-finite value from finite inputs, found by replaying that forward on a
    copy of the model under a function mode, at its line. When the model's
    output is finite it points at the line that computed the loss.

    ## Why is this bad?
    Once a NaN reaches the weights, everything after it is wasted compute, and
    the loss curve only shows `nan` from some step on, not where it came from.

    ## Example
    ```python
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 2)

        def forward(self, x):
            return torch.log(self.linear(x))  # log of negative numbers


    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        loss = model(x).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn
    import torch.nn.functional as F


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 2)

        def forward(self, x):
            return F.log_softmax(self.linear(x), dim=-1)


    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        loss = -model(x).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR111", "frozen-batchnorm-updates", Severity.INFO)
class FrozenBatchNormUpdates:
    """A batch-norm layer whose parameters are frozen still updates its running statistics.

    ## What it does
    Reports batch-norm layers whose weight and bias have `requires_grad=False`
    but that run in training mode during training steps, so their running mean
    and variance keep moving with every batch.

    ## Why is this bad?
    Freezing a pretrained backbone with `requires_grad_(False)` does not freeze
    its batch-norm statistics: they drift toward the new data (with small
    batches, noisily), and the frozen features change. Often harmless when
    fine-tuning on similar data, hence a hint; put those layers in eval mode
    (or use `FrozenBatchNorm2d`) when they must not move.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    model[:2].requires_grad_(False)
    optimizer = torch.optim.SGD(model[3].parameters(), lr=0.1)
    for step in range(4):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    model[:2].requires_grad_(False)
    optimizer = torch.optim.SGD(model[3].parameters(), lr=0.1)
    for step in range(4):
        model.train()
        model[1].eval()  # keep the frozen statistics
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR112", "gradients-cleared-before-step", Severity.ERROR)
class GradientsClearedBeforeStep:
    """`zero_grad()` runs between `backward()` and `step()`: every step applies nothing.

    ## What it does
    Watches `zero_grad` (of an optimizer or a module) and each parameter's
    gradient. It reports the `zero_grad` call that clears the gradients a
    backward has just computed, when the optimizer's next step then finds every
    one of them cleared (None or zeros, with no backward in between). A
    discriminator zeroed between the generator's backward and the generator's
    step is not reported: the step that follows is not the discriminator's.

    ## Why is this bad?
    The step sees no gradient. With `set_to_none=True` (the default since torch
    2.0) optimizers skip the parameters entirely; with zeros, SGD applies only
    weight decay and momentum. The loss is computed and printed at every step,
    and the model never learns from it.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR113", "accumulation-not-averaged", Severity.WARNING)
class AccumulationNotAveraged:
    """Gradients of several batches are accumulated into one step without dividing the loss.

    ## What it does
    Reports an optimizer step that follows backwards over two or more batches
    of the same DataLoader pass, when none of those losses was divided or
    scaled before its backward (the loss's last operation is the loss function
    or a sum, not a division or a multiplication). Several losses of one batch
    backpropagated apart (a GAN discriminator's real and fake halves) are not
    accumulation, and are not reported; nor is a loss scaled by a
    `GradScaler`, whose multiplication hides whether it was also divided.

    ## Why is this bad?
    The step applies the sum of the batches' gradients: with `k` batches per
    step the effective learning rate is `k` times the one configured, and
    changing the accumulation count changes the optimisation, not only the
    memory. Divide each loss by the number of batches accumulated.

    ## Example
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    accumulate = 4
    for i, (x, y) in enumerate(DataLoader(data, batch_size=4, shuffle=True)):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if (i + 1) % accumulate == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    accumulate = 4
    for i, (x, y) in enumerate(DataLoader(data, batch_size=4, shuffle=True)):
        loss = nn.functional.cross_entropy(model(x), y) / accumulate
        loss.backward()
        if (i + 1) % accumulate == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```
    """


@check("TWR114", "trained-network-overwritten", Severity.ERROR)
class TrainedNetworkOverwritten:
    """A network the optimizer trains is overwritten with the weights of one that never changes.

    ## What it does
    Watches `load_state_dict` once training has begun. It reports a call
    that loads into a network an optimizer has stepped the live weights of
    another network whose weights have not changed since the first step: no
    optimizer updates it, nothing copied into it, no in-place update. That is
    a DQN's target network synced the wrong way
    (`policy.load_state_dict(target.state_dict())`), or the optimizer built on
    the target network, which the sync then resets from a policy network that
    never trains. It also reports a soft update written the wrong way round
    (`online.data.copy_(tau * target.data + (1 - tau) * online.data)`): before
    each of the first steps, the trained weights are compared with those the
    last step left; a change that is a step toward a network no optimizer
    holds and nothing has changed is a pull toward it, reported at the line
    that writes it (found by watching the next updates). Syncing a target
    network from the trained one, restoring a saved copy of the weights, and a
    meta-learner's copy of weights that themselves change are not reported.

    ## Why is this bad?
    Every sync throws the optimizer's progress away and puts back the same
    unchanged weights: the loss moves between syncs and training never gets
    anywhere, with no error.

    ## Example
    ```python
    import copy
    import torch
    from torch import nn

    policy = nn.Linear(4, 2)
    target = copy.deepcopy(policy)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for step in range(6):
        state, next_state = torch.randn(8, 4), torch.randn(8, 4)
        q = policy(state).max(1).values
        with torch.no_grad():
            expected = 0.99 * target(next_state).max(1).values + 1.0
        loss = nn.functional.smooth_l1_loss(q, expected)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 2 == 1:
            policy.load_state_dict(target.state_dict())
    ```

    ## Use instead
    ```python
    import copy
    import torch
    from torch import nn

    policy = nn.Linear(4, 2)
    target = copy.deepcopy(policy)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for step in range(6):
        state, next_state = torch.randn(8, 4), torch.randn(8, 4)
        q = policy(state).max(1).values
        with torch.no_grad():
            expected = 0.99 * target(next_state).max(1).values + 1.0
        loss = nn.functional.smooth_l1_loss(q, expected)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 2 == 1:
            target.load_state_dict(policy.state_dict())
    ```
    """
