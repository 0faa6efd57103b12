"""Reproducibility (TWR5xx)."""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.run.catalog import check


@check("TWR501", "seed-after-model-init", Severity.WARNING)
class SeedAfterModelInit:
    """`torch.manual_seed` runs after the model's weights were initialised.

    ## What it does
    Reports the first `torch.manual_seed` call when parameters that an optimizer
    then trains were created before it and still hold their initial values at
    the first optimizer step. A model built first and then loaded from a
    checkpoint is not flagged: its values changed after the seed.

    ## Why is this bad?
    The script asks for reproducibility, but every run starts from different
    weights, so two runs with the same seed give different results and a
    change cannot be compared with the baseline.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    torch.manual_seed(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
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

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR502", "worker-generator-duplicated", Severity.WARNING)
class WorkerGeneratorDuplicated:
    """A dataset's own random generator starts in the same state in every DataLoader worker.

    ## What it does
    Reads, in each DataLoader worker (after the script's `worker_init_fn`), the
    state of the random generators the dataset holds (`random.Random`,
    `numpy.random.RandomState`, `numpy.random.Generator`, up to two attributes
    deep), and reports a generator whose state is the same in two workers or
    at the start of two epochs, at the line that creates it. PyTorch seeds
    `torch`, `random` and `numpy`'s global generators per worker, but not a
    generator object the dataset carries: each worker gets a copy of the same
    one.

    ## Why is this bad?
    Every worker draws the same "random" augmentations, and every epoch
    repeats the previous one's: the augmentation you pay for is a fraction of
    what you think.

    ## Example
    ```python
    import random

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset


    class Jittered(Dataset):
        def __init__(self):
            self.x, self.y = torch.randn(64, 4), torch.randint(0, 2, (64,))
            self.rng = random.Random(0)

        def __len__(self):
            return 64

        def __getitem__(self, index):
            return self.x[index] + self.rng.gauss(0, 0.1), self.y[index]


    if __name__ == "__main__":
        loader = DataLoader(Jittered(), batch_size=8, shuffle=True, num_workers=2)
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
    import random

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset, get_worker_info


    class Jittered(Dataset):
        def __init__(self):
            self.x, self.y = torch.randn(64, 4), torch.randint(0, 2, (64,))
            self.rng = random.Random(0)

        def __len__(self):
            return 64

        def __getitem__(self, index):
            return self.x[index] + self.rng.gauss(0, 0.1), self.y[index]


    def seed_worker(worker_id):
        get_worker_info().dataset.rng.seed(torch.initial_seed())


    if __name__ == "__main__":
        loader = DataLoader(
            Jittered(), batch_size=8, shuffle=True, num_workers=2, worker_init_fn=seed_worker
        )
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    ```
    """


@check("TWR503", "nondeterministic-op-on-gpu", Severity.ERROR, needs="as_cuda")
class NondeterministicOpOnGpu:
    """A script that asks for determinism runs an operation a GPU runs nondeterministically.

    ## What it does
    Under `--as-cuda`, checks every operation on a tensor that would be on the
    GPU against the tables of `torch.use_deterministic_algorithms`' own
    documentation. With `torch.use_deterministic_algorithms(True)`, an
    operation that has no deterministic CUDA implementation (the backward of
    `adaptive_avg_pool2d`, `interpolate` in a linear mode, `cumsum` of floats,
    `histc`, ...) is an error: it raises a `RuntimeError` on the GPU, although
    it runs on the CPU. With only `torch.backends.cudnn.deterministic = True`,
    those and the atomics-based ones (`index_add_`, `scatter_add_`, the backward
    of `gather` and `index_select`) are a hint: cuDNN's flag does not make them
    deterministic.

    ## Why is this bad?
    A CPU run cannot show it: the CPU kernels are deterministic. On the GPU
    node the job either dies at its first step or gives a different model
    every run although every seed is set.

    ## Example
    ```python
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(), nn.Linear(32, 2)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(4, 3, 16, 16, device=device)
        y = torch.randint(0, 2, (4,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AvgPool2d(7), nn.Flatten(), nn.Linear(32, 2)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(4, 3, 16, 16, device=device)
        y = torch.randint(0, 2, (4,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```
    """


@check("TWR504", "seed-not-in-spawned-process", Severity.WARNING, needs="spawn")
class SeedNotInSpawnedProcess:
    """The script seeds torch, then `mp.spawn` starts processes that draw unseeded.

    ## What it does
    When the script calls `torch.manual_seed` before `torch.multiprocessing.spawn`
    (or `start_processes`), checks each spawned process: one that never seeds torch
    itself but draws from torch's global generator (a model's initial weights,
    dropout, `torch.randn`, a `RandomSampler` without a generator) is reported at
    the line of the `mp.spawn` call, with the line of the parent's seed.

    ## Why is this bad?
    A spawned process is a fresh interpreter: the parent's seed does not reach
    it, and its generator starts from a random seed. The script looks seeded,
    but every run draws different initial weights, dropout masks and shuffles,
    so two runs of the same code disagree and a regression cannot be told from
    noise.

    ## Example
    ```python
    import os
    import socket

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    def worker(rank, world_size, port):
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        model = DDP(nn.Linear(4, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        dist.destroy_process_group()


    if __name__ == "__main__":
        torch.manual_seed(0)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        mp.spawn(worker, args=(2, port), nprocs=2)
    ```

    ## Use instead
    ```python
    import os
    import socket

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    def worker(rank, world_size, port):
        torch.manual_seed(0)  # in the process that draws
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        model = DDP(nn.Linear(4, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        dist.destroy_process_group()


    if __name__ == "__main__":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        mp.spawn(worker, args=(2, port), nprocs=2)
    ```
    """
