"""``--nproc 2``: two gloo ranks under torch.distributed.run, compared in the parent.

Three runs cover every distributed check: one script with four cross-rank bugs,
one with two more, and the fixed script. Each run starts three interpreters
(torchrun and two ranks), so they are marked slow.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchwise.run import RunOptions, run_script

pytestmark = pytest.mark.slow

PREAMBLE = """\
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("nccl")  # rewritten to gloo on the CPU ranks
rank = dist.get_rank()
torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.body = nn.Linear(4, 2)
        self.auxiliary = nn.Linear(4, 2)

    def forward(self, x, auxiliary=False):
        x = self.norm(x)
        return self.auxiliary(x) if auxiliary else self.body(x)


"""

FOUR_BUGS = """\
loader = DataLoader(data, batch_size=8, shuffle=True)  # no DistributedSampler: TWR601
model = Net()
nn.SyncBatchNorm.convert_sync_batchnorm(model.norm)  # returned, not put back: TWR605
torch.save(model.state_dict(), "init.pt")  # on every rank: TWR606
model = DDP(model)  # auxiliary never used, find_unused_parameters=False: TWR604
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

THREE_BUGS = """\
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=8, sampler=sampler)
net = Net()
model = DDP(net, find_unused_parameters=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = nn.functional.cross_entropy(net(x), y)  # the unwrapped module: TWR602
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"train loss: {loss.item():.4f}")  # each rank's own shard: TWR608
total = torch.tensor([loss.item()])
if rank == 0:
    dist.all_reduce(total)  # rank 1 never joins: TWR603
"""

FIXED = """\
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=8, sampler=sampler)
model = nn.SyncBatchNorm.convert_sync_batchnorm(Net())
model = DDP(model, find_unused_parameters=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x, auxiliary=epoch == 1), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
total = torch.tensor([loss.item()])
dist.all_reduce(total)
print(f"rank {rank}: mean loss {total.item() / dist.get_world_size():.4f}")  # reduced: equal
if rank == 0:
    torch.save(model.module.state_dict(), "final.pt")
dist.barrier()
dist.destroy_process_group()
"""


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the ranks save their checkpoints in the working directory


def _run(tmp_path: Path, body: str) -> list[tuple[str, int, str]]:
    script = tmp_path / "train.py"
    script.write_text(PREAMBLE + textwrap.dedent(body))
    options = RunOptions(nproc=2, steps=3, collective_timeout=10, script_output="capture")
    report = run_script(script, options=options)
    first = len(PREAMBLE.splitlines())
    return sorted((f.code, f.line - first, f.severity.value) for f in report.findings)


def test_four_cross_rank_bugs(tmp_path: Path) -> None:
    assert _run(tmp_path, FOUR_BUGS) == [
        ("TWR601", 1, "error"),
        ("TWR604", 5, "error"),
        ("TWR605", 3, "warning"),
        ("TWR606", 4, "warning"),
    ]


def test_diverging_ranks_a_lonely_collective_and_a_metric_per_rank(tmp_path: Path) -> None:
    found = _run(tmp_path, THREE_BUGS)
    assert ("TWR602", 10, "error") in found
    assert ("TWR603", 14, "error") in found
    assert ("TWR607", 7, "error") in found  # seen at the first step, before any divergence
    assert ("TWR608", 11, "warning") in found
    expected = ("TWR602", "TWR603", "TWR607", "TWR608", "TWR102")
    assert all(code in expected for code, _, _ in found), found


def test_the_fixed_script_is_clean(tmp_path: Path) -> None:
    assert [f for f in _run(tmp_path, FIXED) if f[2] != "info"] == []
