"""Data (TWR3xx)."""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.run.catalog import check


@check("TWR301", "same-order-every-epoch", Severity.WARNING)
class SameOrderEveryEpoch:
    """A training DataLoader yields its samples in the same order in every epoch.

    ## What it does
    Reports a DataLoader used for training (a backward runs while it yields)
    that is not shuffled (a sequential sampler, or a `DistributedSampler` with
    `shuffle=False`), a `DistributedSampler` whose `set_epoch` is never called
    (the same shuffle in every epoch), or a custom sampler or iterable dataset
    that produced the same indices (or batches) in two epochs. Loaders used only
    for evaluation are never flagged: their order does not matter, and a loader
    whose whole dataset fits in one batch is not flagged either.

    ## Why is this bad?
    The same batches in the same order every epoch make SGD's noise
    correlated across epochs: training converges to worse minima, and sorted
    datasets (by class, by length, by date) train on one class at a time.

    ## Example
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=8)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    validation = DataLoader(data, batch_size=8)  # evaluation order does not matter
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for x, y in validation:
                model(x)
    ```
    """


@check("TWR302", "loss-broadcasts-target", Severity.ERROR)
class LossBroadcastsTarget:
    """A loss compares predictions and targets of different shapes by broadcasting them.

    ## What it does
    Reports a regression loss (`mse_loss`, `l1_loss`, `smooth_l1_loss`,
    `huber_loss`, `soft_margin_loss`, and the `nn.*Loss` modules that call
    them) whose input and target broadcast to a shape larger than both, such as
    `(N, 1)` against `(N,)` giving `(N, N)`. A hand-written loss is checked from
    its autograd graph: an elementwise operation that turns the model's
    `(N, 1)` or `(N,)` output into `(N, N)` against a target.

    ## Why is this bad?
    Every prediction is compared with every target: the loss is a number, it
    decreases, and the model learns to predict the batch mean. PyTorch only
    warns for some of these losses, once, in a log nobody reads.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randn(8)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randn(8)
        loss = nn.functional.mse_loss(model(x).squeeze(1), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR303", "labels-out-of-range", Severity.ERROR)
class LabelsOutOfRange:
    """Class labels fall outside the model's output, or binary targets outside [0, 1].

    ## What it does
    Reports `cross_entropy` and `nll_loss` (and `nn.CrossEntropyLoss`,
    `nn.NLLLoss`) called with class indices below 0 or at least the number of
    classes in the output (`ignore_index` excepted), and `binary_cross_entropy`
    (with or without logits) called with targets outside `[0, 1]`, with the
    range found and the number of classes.

    ## Why is this bad?
    Labels numbered from 1, or a head with one class too few, is an
    `IndexError` on the CPU and a device-side assert on a GPU that kills the
    job without saying which batch; binary targets of 0 and 2 train silently
    toward nonsense.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        y = torch.randint(1, 4, (8,))  # labels 1..3 for 3 classes
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        y = torch.randint(1, 4, (8,)) - 1  # labels 0..2
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR305", "cross-entropy-over-one-class", Severity.ERROR)
class CrossEntropyOverOneClass:
    """`cross_entropy` gets an output with a single class: the loss is always 0.

    ## What it does
    Reports `cross_entropy` (and `nn.CrossEntropyLoss`) called with an output
    of shape `(N, 1, ...)`: one logit per sample, as a binary classifier or a
    regression head produces.

    ## Why is this bad?
    The softmax of a single logit is 1 whatever the logit, so the loss is 0
    for every input and every target (a class index, which can only be 0, or a
    probability), and no gradient reaches the model: training runs, prints a
    loss of 0, and learns nothing. A one-logit binary classifier needs
    `binary_cross_entropy_with_logits`; a regression head, `mse_loss`; a
    classifier, one output per class.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8, 1)).float()
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8, 1)).float()
        loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR304", "same-batch-every-step", Severity.WARNING)
class SameBatchEveryStep:
    """Every training step gets the same batch.

    ## What it does
    Reports a training DataLoader whose first batches (three or more) are all
    identical, which happens when a dataset ignores the index it is given, and
    a model that gets the same DataLoader batch at three or more training steps
    outside any pass over the loader, which happens when a batch is taken once,
    before the loop. Full-batch training on a fixed tensor (no DataLoader
    involved) is deliberate and not flagged.

    ## Why is this bad?
    The model memorises one batch: the training loss falls to zero and
    nothing is learned. Overfitting one batch on purpose is a debugging step,
    not a training run.

    ## Example
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset


    class Samples(Dataset):
        def __init__(self):
            self.x, self.y = torch.randn(64, 4), torch.randint(0, 2, (64,))

        def __len__(self):
            return 64

        def __getitem__(self, index):
            return self.x[0], self.y[0]


    loader = DataLoader(Samples(), batch_size=8, shuffle=True)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset


    class Samples(Dataset):
        def __init__(self):
            self.x, self.y = torch.randn(64, 4), torch.randint(0, 2, (64,))

        def __len__(self):
            return 64

        def __getitem__(self, index):
            return self.x[index], self.y[index]


    loader = DataLoader(Samples(), batch_size=8, shuffle=True)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR306", "loss-given-probabilities", Severity.ERROR)
class LossGivenProbabilities:
    """A loss that normalises its input gets probabilities, or `nll_loss` gets raw scores.

    ## What it does
    Reads the input of the classification losses when they run:
    - `cross_entropy` (and `nn.CrossEntropyLoss`) given probabilities: every
      value in `[0, 1]` and every row summing to 1 over the class dimension
      (a softmax already applied);
    - `nll_loss` (and `nn.NLLLoss`) given anything but log-probabilities: a
      value above 0 (raw scores, or probabilities);
    - `binary_cross_entropy_with_logits` given the output of a sigmoid.

    Cross entropy of log-probabilities is not reported: `log_softmax` of a
    `log_softmax` is the same tensor, so the loss and its gradients are those
    of the logits.

    ## Why is this bad?
    `cross_entropy` applies `log_softmax` itself: over probabilities it
    squashes every output into a narrow band, its gradients shrink, and the
    model learns slowly or stalls at a high loss. `nll_loss` only picks
    `-input[target]`: over raw scores the loss has no lower bound and
    training pushes one score to infinity; over probabilities it is not the
    log-likelihood. A sigmoid before `..._with_logits` applies the sigmoid
    twice: predictions never leave `[0.5, 0.73]`.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 3)  # logits; softmax only to read probabilities
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """
