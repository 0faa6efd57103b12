"""Devices, checked without a GPU (TWR4xx): ``torchwise run --as-cuda``.

The script believes CUDA is available; every tensor carries the device it would
have on the GPU node, so what would fail there fails here, at the same line.
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.run.catalog import check


@check("TWR401", "mixed-device-op", Severity.ERROR, needs="as_cuda")
class MixedDeviceOp:
    """An operation gets tensors on two devices: the crash the GPU node would hit.

    ## What it does
    Under `--as-cuda`, `torch.cuda.is_available()` answers True and every
    tensor carries the device it would have: factories' `device=`, `.to()`,
    `.cuda()`, `.cpu()`, parameters (on the CPU until their module moves),
    DataLoader batches (on the CPU), and every other result on its inputs'
    device. An operation whose tensor arguments sit on two devices is reported
    at the user's line, with each tensor's device, shape and origin: where a
    CPU tensor was created or taken from the DataLoader, the first user line
    that handled it after that (often where a `.to(device)` is missing) and
    the last, the plain
    module attribute it is (`self.pe = pe`, which `module.to()` never moves),
    or the line that moved a CUDA tensor to its device; the run
    then goes on (the tensors are all on the CPU really), so one run finds
    every such line. A CPU tensor with no dimensions mixes with CUDA tensors,
    as on a GPU, and copies and indexing with CPU indices are allowed.

    ## Why is this bad?
    On the GPU node the job raises `Expected all tensors to be on the same
    device` at that line, after the queue wait and the data loading; on a
    laptop without a GPU it never shows.

    ## Example
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR402", "cuda-tensor-to-numpy", Severity.ERROR, needs="as_cuda")
class CudaTensorToNumpy:
    """`.numpy()` is called on a tensor that would be on the GPU.

    ## What it does
    Under `--as-cuda`, reports `tensor.numpy()` on a tensor whose simulated
    device is CUDA, at the user's line.

    ## Why is this bad?
    On a GPU it raises `can't convert cuda:0 device type tensor to numpy`:
    metrics and logging code that works on a laptop crashes at the end of the
    first epoch on the GPU node.

    ## Example
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4, device=device), torch.randint(0, 2, (8,), device=device)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        predictions = logits.argmax(1).numpy()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4, device=device), torch.randint(0, 2, (8,), device=device)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        predictions = logits.argmax(1).cpu().numpy()
    ```
    """


@check("TWR403", "created-on-cpu-every-step", Severity.INFO, needs="as_cuda")
class CreatedOnCpuEveryStep:
    """A tensor is created on the CPU and copied to the GPU at every step.

    ## What it does
    Under `--as-cuda`, reports a factory call in the user's code (`torch.zeros`,
    `torch.arange`, `torch.ones_like`, ...) that makes a CPU tensor which is
    moved to the GPU in the same step, at two or more steps. DataLoader batches
    are not counted: moving them is what they are for.

    ## Why is this bad?
    Each step pays a host allocation, a host-to-device copy and a
    synchronisation for a tensor the GPU could create itself: small, but inside
    the hottest loop of the job.

    ## Example
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x = torch.randn(8, 4, device=device)
        y = torch.zeros(8, dtype=torch.long).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x = torch.randn(8, 4, device=device)
        y = torch.zeros(8, dtype=torch.long, device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """
