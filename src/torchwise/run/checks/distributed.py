"""Distributed training (TWR6xx): ``torchwise run SCRIPT --nproc K``.

The script runs as K ranks under ``torch.distributed.run`` with gloo on CPU
(``init_process_group("nccl")`` is rewritten to gloo, with ``--collective-timeout``
as its time limit); a script written for GPUs needs ``--as-cuda`` too. Each rank
records what it saw and the parent compares them.
"""

from __future__ import annotations

from torchwise.findings import Severity
from torchwise.run.catalog import check


@check("TWR601", "ranks-see-same-batches", Severity.ERROR, needs="nproc")
class RanksSeeSameBatches:
    """Data-parallel ranks train on the same samples.

    ## What it does
    Compares the sample indices (or, for iterable datasets, the batch
    fingerprints) of the first training batches of each rank, for a model
    wrapped in `DistributedDataParallel`, and reports a DataLoader whose ranks
    share half or more of their samples, at the line that builds it.

    ## Why is this bad?
    Without a `DistributedSampler` every rank iterates the whole dataset in
    the same order (they share the seed): K GPUs compute the same gradients,
    the job costs K times as much for a single GPU's progress, and each epoch
    is K epochs of repeated data.

    ## Example
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = DDP(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = DDP(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    sampler.set_epoch(0)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```
    """


@check("TWR602", "parameters-differ-across-ranks", Severity.ERROR, needs="nproc")
class ParametersDifferAcrossRanks:
    """The ranks' parameters differ after an optimizer step.

    ## What it does
    Every rank fingerprints the parameters it optimizes after each of its first
    three steps; the parent compares them and reports the first step after
    which two ranks disagree, with the parameter that differs most, at the
    line of the optimizer step.

    ## Why is this bad?
    Data-parallel training relies on every rank holding the same model: when
    the forward goes through the unwrapped module (so DDP never averages the
    gradients), or an update depends on the rank, the ranks drift apart and the
    checkpoint rank 0 saves is trained on an eighth of the data.

    ## Example
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = nn.Linear(4, 2)
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4) + rank  # each rank its own shard
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = nn.Linear(4, 2)
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4) + rank  # each rank its own shard
        loss = ddp_model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```
    """


@check("TWR603", "collective-mismatch", Severity.ERROR, needs="nproc")
class CollectiveMismatch:
    """Ranks call different collectives (rank-dependent control flow before one): a hang.

    ## What it does
    Every rank writes each collective call (`all_reduce`, `barrier`,
    `broadcast`, ...) with its line as it starts and ends. When a rank is left
    waiting (gloo's time limit, `--collective-timeout`, ends the wait instead
    of a hang) or the ranks' sequences of collectives differ, the finding names
    what each rank was doing and where: waiting in which collective, finished,
    or crashed. A rank that timed out where no logged collective was open waited
    in one torch runs itself (a forward or backward through DDP that the other
    ranks did not make); that is reported the same way, at the line of the
    forward or backward, unless another rank crashed first.

    ## Why is this bad?
    A collective inside `if rank == 0:` waits for partners that never come: on
    NCCL the job hangs, holding every GPU, until a watchdog kills it (ten
    minutes by default), with no line in the log.

    ## Example
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    model = DDP(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    total = torch.tensor([loss.item()])
    if dist.get_rank() == 0:
        dist.all_reduce(total)  # only rank 0 joins
        print("mean loss", total.item() / dist.get_world_size())
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    model = DDP(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    total = torch.tensor([loss.item()])
    dist.all_reduce(total)  # every rank joins
    if dist.get_rank() == 0:
        print("mean loss", total.item() / dist.get_world_size())
    dist.destroy_process_group()
    ```
    """


@check("TWR604", "ddp-unused-parameters", Severity.ERROR, needs="nproc")
class DdpUnusedParameters:
    """A DistributedDataParallel model has parameters that get no gradient.

    ## What it does
    At the first optimizer step, lists the parameters of each
    `DistributedDataParallel` model that received no gradient. With
    `find_unused_parameters=False` (the default) that is an error: DDP waits for
    their gradients and the next iteration raises. With
    `find_unused_parameters=True` and no unused parameter, it is a hint: the
    flag costs a traversal of the graph at every iteration.

    ## Why is this bad?
    The crash comes at the second iteration with `Expected to have finished
    reduction in the prior iteration` and parameter indices, not names; and
    the first step's gradients were never averaged.

    ## Example
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 2)
            self.auxiliary = nn.Linear(4, 2)  # only used for some batches

        def forward(self, x, auxiliary=False):
            return self.auxiliary(x) if auxiliary else self.body(x)


    dist.init_process_group("gloo")
    model = DDP(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 2)
            self.auxiliary = nn.Linear(4, 2)  # only used for some batches

        def forward(self, x, auxiliary=False):
            return self.auxiliary(x) if auxiliary else self.body(x)


    dist.init_process_group("gloo")
    model = DDP(Net(), find_unused_parameters=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```
    """


@check("TWR605", "batchnorm-not-synchronized", Severity.WARNING, needs="nproc")
class BatchNormNotSynchronized:
    """The script converts to SyncBatchNorm, but plain batch norm is what trains.

    ## What it does
    When the script calls `nn.SyncBatchNorm.convert_sync_batchnorm`, checks the
    model each `DistributedDataParallel` wraps and reports batch-norm layers in
    it that are not `SyncBatchNorm`, at the conversion's line. The converted
    module is returned, not changed in place, when it is itself a batch-norm
    layer; converting one model and wrapping another is the other way to get
    here. (`SyncBatchNorm` has no CPU kernel: on the CPU ranks of a run it is
    computed by an all-reduce of the batch statistics.)

    ## Why is this bad?
    The script asked for statistics over the global batch; each rank
    normalises with its own small batch instead, which is what SyncBatchNorm
    was meant to prevent, and nothing says so.

    ## Example
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    nn.SyncBatchNorm.convert_sync_batchnorm(model[1])  # returns a new layer, model keeps the old
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```
    """


@check("TWR606", "checkpoint-written-by-every-rank", Severity.WARNING, needs="nproc")
class CheckpointWrittenByEveryRank:
    """Every rank writes the same checkpoint file.

    ## What it does
    Records the path of every `torch.save` on each rank and reports a file
    that two or more ranks write, at the line that saves it.

    ## Why is this bad?
    K processes write one file at the same moment: on a shared filesystem the
    result can be a corrupt or truncated checkpoint, and the job spends K
    times the I/O. The checkpoint you resume from may not load.

    ## Example
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    model = DDP(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    model = DDP(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.barrier()
    dist.destroy_process_group()
    ```
    """


@check("TWR607", "ddp-forward-bypassed", Severity.ERROR, needs="nproc")
class DdpForwardBypassed:
    """The training forward calls the module inside `DistributedDataParallel`, not the wrapper.

    ## What it does
    At each optimizer step of a run with two or more ranks, looks at the
    model calls since the previous step. It reports the call of a module that
    a `DistributedDataParallel` wraps, made directly (`model.module(x)`, or the
    module kept under another name before wrapping) when its output reached
    the backward and the wrapper itself was not called, and no collective ran
    between the steps (a script that averages the gradients itself is not
    reported). It is seen at the first step, even while a warm-up keeps the
    learning rate at 0 and the ranks' weights still agree (TWR602 sees the
    divergence once they differ).

    ## Why is this bad?
    DDP averages gradients in hooks that its own `forward` prepares. Called
    bare, the module's backward fills each rank's gradients with that rank's
    batch only: every rank trains its own copy of the model on its shard of
    the data, the copies drift apart, and the checkpoint rank 0 saves has
    seen a fraction of the data.

    ## Example
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    model = DDP(nn.Linear(4, 2))
    raw_model = model.module  # for saving and logging
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = raw_model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    model = DDP(nn.Linear(4, 2))
    raw_model = model.module  # for saving and logging
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
    ```
    """


@check("TWR608", "metric-differs-across-ranks", Severity.WARNING, needs="nproc")
class MetricDiffersAcrossRanks:
    """Every rank prints or logs its own value of a metric at the same line.

    ## What it does
    Under `--nproc`, keeps the first lines each rank prints (`print`) or logs
    (`logging`) from the script's code. When two ranks print the same line
    with a metric in it (a number after `loss`, `acc`, `f1`, `ppl`, `reward`,
    `score`...) and the two values differ beyond rounding, each rank reports
    the value of its own shard of the data. A value that went through
    `all_reduce` is equal on every rank and is not reported, nor is a line
    only rank 0 prints.

    ## Why is this bad?
    With N ranks each sees 1/N of the batch: its loss or accuracy is one
    shard's, not the model's. The logs show N different numbers for one
    step, the one a dashboard keeps is whichever rank wrote last, and a
    "best" checkpoint chosen on it is chosen on a fraction of the validation
    set.

    ## Example
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(dist.get_rank())
    for step in range(3):
        x = torch.randn(8, 4, generator=generator)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(dist.get_rank())
    for step in range(3):
        x = torch.randn(8, 4, generator=generator)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        reported = loss.detach().clone()
        dist.all_reduce(reported)
        reported /= dist.get_world_size()
        print(f"step {step} loss {reported.item():.4f}")
    dist.destroy_process_group()
    ```
    """
