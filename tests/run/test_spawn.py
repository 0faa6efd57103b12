"""Scripts that start their own ranks with ``torch.multiprocessing.spawn``.

``torchwise run train.py`` (no ``--nproc``): each spawned process runs under the
checks as one rank, and the parent compares them as it compares torchrun's
ranks. Each run starts three interpreters, so these are marked slow.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchwise.run import RunOptions, run_script

pytestmark = pytest.mark.slow

SCRIPT = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def worker(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)  # gloo on CPU
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    {loader}
    model = DDP(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        {set_epoch}
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    {after}
    dist.destroy_process_group()


if __name__ == "__main__":
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(worker, args=(2, port), nprocs=2, join=True)
    print("parent done")
"""
#: no test here waits for a collective to time out: a long limit keeps a slow start of one
#: process on a loaded machine from failing the rendezvous
COLLECTIVE_TIMEOUT = 120

SAMPLER = "loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))"
UNSAMPLED = "loader = DataLoader(data, batch_size=8, shuffle=True)"
SET_EPOCH = "loader.sampler.set_epoch(epoch)"


def _run(tmp_path: Path, **parts: str) -> tuple[list[tuple[str, int, str]], str, dict[str, object]]:
    fields = {"loader": SAMPLER, "set_epoch": SET_EPOCH, "after": "pass", **parts}
    source = SCRIPT.format(**fields)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    options = RunOptions(steps=3, collective_timeout=COLLECTIVE_TIMEOUT, script_output="capture")
    report = run_script(script, options=options, cwd=tmp_path)
    found = sorted((f.code, f.line, f.severity.value) for f in report.findings)
    return found, report.output, report.summary()


def _line(source_part: str, **parts: str) -> int:
    fields = {"loader": SAMPLER, "set_epoch": SET_EPOCH, "after": "pass", **parts}
    lines = SCRIPT.format(**fields).splitlines()
    return next(n for n, line in enumerate(lines, 1) if source_part in line)


def test_spawned_ranks_that_share_their_data_are_compared(tmp_path: Path) -> None:
    found, output, summary = _run(tmp_path, loader=UNSAMPLED, set_epoch="pass")
    assert ("TWR601", _line(UNSAMPLED, loader=UNSAMPLED), "error") in found
    assert summary["spawned"] is True and summary["ranks"] == 2
    assert int(str(summary["steps"])) >= 3  # the spawned processes trained
    assert "parent done" in output  # mp.spawn returned to the script, as torch's does


def test_a_crash_in_a_spawned_process_is_reported_at_its_line(tmp_path: Path) -> None:
    after = "if rank == 1: raise ValueError('boom')"
    found, output, summary = _run(tmp_path, after=after)
    assert ("TWR001", _line("boom", after=after), "error") in found
    assert "parent done" not in output  # as with torch: the parent's spawn raises
    assert "spawned process 1" in str(summary["stopped_by"])


def test_the_fixed_spawn_script_is_clean(tmp_path: Path) -> None:
    found, output, _ = _run(tmp_path)
    assert [f for f in found if f[2] != "info"] == []
    assert "parent done" in output


def test_a_spawning_script_under_nproc_gets_one_clear_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    source = SCRIPT.format(loader=SAMPLER, set_epoch=SET_EPOCH, after="pass")
    script.write_text(source, encoding="utf-8")
    options = RunOptions(
        nproc=2, steps=3, collective_timeout=COLLECTIVE_TIMEOUT, script_output="capture"
    )
    report = run_script(script, options=options, cwd=tmp_path)
    crashes = [f for f in report.findings if f.code == "TWR001"]
    assert [f.line for f in crashes] == [_line("mp.spawn(")]
    assert "without --nproc" in crashes[0].message


def test_start_processes_without_join_returns_a_context_to_join(tmp_path: Path) -> None:
    source = SCRIPT.format(loader=SAMPLER, set_epoch=SET_EPOCH, after="pass").replace(
        "    mp.spawn(worker, args=(2, port), nprocs=2, join=True)",
        "    context = mp.start_processes(worker, args=(2, port), nprocs=2, join=False,\n"
        "                                 start_method='spawn')\n"
        "    assert len(context.pids()) == 2\n"
        "    while not context.join():\n"
        "        pass",
    )
    script = tmp_path / "train.py"
    script.write_text(source, encoding="utf-8")
    options = RunOptions(steps=3, collective_timeout=COLLECTIVE_TIMEOUT, script_output="capture")
    report = run_script(script, options=options, cwd=tmp_path)
    assert [f for f in report.findings if f.severity.value != "info"] == []
    assert "parent done" in report.output and report.summary()["ranks"] == 2


def test_twr504_example_and_use_instead(tmp_path: Path) -> None:
    from torchwise.run.catalog import get_check

    check = get_check("TWR504")
    assert check is not None
    options = RunOptions(steps=3, collective_timeout=COLLECTIVE_TIMEOUT, script_output="capture")
    found = {}
    for name, source in (("example", check.example()), ("use_instead", check.use_instead())):
        script = tmp_path / f"{name}.py"
        script.write_text(source, encoding="utf-8")
        report = run_script(script, options=options, cwd=tmp_path)
        found[name] = [(f.code, f.line) for f in report.findings if f.severity.value != "info"]
    spawn_line = next(n for n, t in enumerate(check.example().splitlines(), 1) if "mp.spawn(" in t)
    assert found["example"] == [("TWR504", spawn_line)]
    assert found["use_instead"] == []
