"""The run itself (TWR0xx)."""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.run.catalog import check


@check("TWR001", "script-raised", Severity.ERROR)
class ScriptRaised:
    """The script raised an exception, or exited with a non-zero status, on the path it ran.

    ## What it does
    Reports an exception that escaped the script (or a `sys.exit` with a
    non-zero status) within the steps that ran, at the innermost line of the
    user's code in its traceback. The traceback itself is printed as Python
    would print it. When another finding explains the same line (a label out of
    range, a device mismatch), the crash is added to that finding instead.

    ## Why is this bad?
    A crash in the second epoch or in the first evaluation is found after hours
    on a cluster; running a few steps of every phase finds it in seconds.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    accuracy = model(torch.randn(8, 3))  # the evaluation batch has the wrong width
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    with torch.no_grad():
        accuracy = model(torch.randn(8, 4))
    ```
    """
