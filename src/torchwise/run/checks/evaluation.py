"""Evaluation (TWR2xx).

An *evaluation loop* is what the program does, not what its functions are
called: two or more consecutive calls of a model at one line that no
``backward`` uses, with no ``backward`` between them.
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.run.catalog import check


@check("TWR201", "evaluation-in-train-mode", Severity.ERROR)
class EvaluationInTrainMode:
    """An evaluation loop runs the model with dropout or batch norm in training mode.

    ## What it does
    Reports an evaluation loop (see the family's introduction) whose model has
    dropout with `p > 0` or batch norm that tracks running statistics in
    training mode, with the layers and the line of the last `model.train()`.
    A model without such layers is never flagged: its evaluation is the same
    in either mode.

    ## Why is this bad?
    Dropout randomly zeroes activations in the evaluation, so the metric is
    noisy and pessimistic; batch norm normalises with the evaluation batch's
    statistics and updates the running statistics with evaluation data, which
    leaks it into the model you keep.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        correct = 0
        for batch in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            correct += (model(x).argmax(1) == y).sum().item()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        correct = 0
        for batch in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            correct += (model(x).argmax(1) == y).sum().item()
    ```
    """


@check("TWR202", "evaluation-with-grad", Severity.WARNING)
class EvaluationWithGrad:
    """An evaluation loop runs with autograd on.

    ## What it does
    Reports an evaluation loop whose calls all ran with grad enabled on a model
    with trainable parameters: each batch builds an autograd graph that no
    backward uses.

    Severity follows the cost: a warning for batches (a DataLoader pass, or
    calls of two samples or more), a hint for calls of one sample each (an
    agent choosing its actions, a one-off probe), whose graphs are small.

    ## Why is this bad?
    Every activation is kept for a backward that never comes: evaluation uses
    several times the memory it needs (and runs out of it at batch sizes
    training handles), and it is slower. If the loop also accumulates the
    outputs, TWR109 reports the graphs it keeps.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    correct = 0
    for batch in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        correct += (model(x).argmax(1) == y).sum().item()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    correct = 0
    with torch.inference_mode():
        for batch in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            correct += (model(x).argmax(1) == y).sum().item()
    ```
    """


@check("TWR203", "train-mode-not-restored", Severity.ERROR)
class TrainModeNotRestored:
    """Training continues in eval mode after an evaluation switched the model to it.

    ## What it does
    Reports training calls (ones a backward uses) that run dropout or batch-norm
    layers in eval mode, when earlier training calls of the same model ran those
    layers in training mode, with the line of the `model.eval()` that switched
    them. A model kept in eval mode from the start on purpose (fine-tuning with
    frozen batch norm) is not flagged.

    ## Why is this bad?
    From the second epoch on, the model trains without dropout and with frozen
    batch-norm statistics: it overfits, and its validation numbers differ from
    the first epoch's for no visible reason.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


    def evaluate():
        model.eval()
        with torch.no_grad():
            for batch in range(3):
                model(torch.randn(8, 4))


    model.train()
    for epoch in range(2):
        for step in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        evaluate()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


    def evaluate():
        model.eval()
        with torch.no_grad():
            for batch in range(3):
                model(torch.randn(8, 4))


    for epoch in range(2):
        model.train()
        for step in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        evaluate()
    ```
    """
