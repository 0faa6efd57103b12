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


@check("TWR002", "library-warned", Severity.INFO)
class LibraryWarned:
    """A warning torch (or another library) issued while the script ran, at the user's line.

    ## What it does
    Records every warning shown while the script runs (the first time each
    message is issued at a place, as Python's default filters show it) and
    reports it at the innermost line of the user's code that led to it, with
    the warning's category and message. Python attributes a library's
    warning to the frame its `stacklevel` names, often a line inside the
    library (or inside torchwise's own monitors); the report, and the
    warning as printed during the run, name the user's line instead.

    ## Why is this bad?
    torch warns when a call does not do what its arguments say: a loss whose
    input and target shapes differ, dropout on a one-layer LSTM, a scheduler
    stepped before its optimizer, a deprecated argument. The warning scrolls
    past in a log; this puts it in the report, at the line to change. A hint:
    many warnings are about the environment, not a bug.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.LSTM(4, 8, dropout=0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        output, _ = model(torch.randn(5, 2, 4))
        output.sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.LSTM(4, 8, num_layers=2, dropout=0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        output, _ = model(torch.randn(5, 2, 4))
        output.sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    ```
    """
