"""The user's DataLoader: loading it, splitting its batches, rebuilding it, scanning it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.tune.loader import (
    LoaderSettings,
    load_loader,
    split_batch,
    worker_candidates,
)
from torchwise.tune.loader_scan import scan_loader
from torchwise.tune.session import SessionConfig

DATA = Path(__file__).parent / "loader_data.py"


def test_split_batch_understands_the_usual_shapes() -> None:
    x, y = torch.ones(2, 3), torch.zeros(2, dtype=torch.long)
    assert split_batch((x, y)).args[0] is x and split_batch((x, y)).target is y
    three = split_batch([x, x, y])
    assert len(three.args) == 2 and three.target is y
    as_dict = split_batch({"input_ids": x, "labels": y})
    assert as_dict.args == () and list(as_dict.kwargs) == ["input_ids"] and as_dict.target is y
    lone = split_batch(x)
    assert lone.args == (x,) and lone.target is None
    nested = split_batch(((x, x), y))
    assert len(nested.args) == 2
    with pytest.raises(TorchwiseError, match="tune understands"):
        split_batch("text")


def test_load_loader_and_rebuild_it_with_workers() -> None:
    source = load_loader(f"{DATA}:make_loader")
    assert source.user_settings == LoaderSettings(0, False, False, None)
    plain = [b for _, b in zip(range(8), iter(source.build(LoaderSettings())), strict=False)]
    workers = source.build(LoaderSettings(1, False, True, 2))
    assert workers.num_workers == 1 and workers.persistent_workers
    rebuilt = list(iter(workers))
    assert len(rebuilt) == len(plain) == 8
    assert all(torch.equal(a[0], b[0]) for a, b in zip(plain, rebuilt, strict=True))
    source.close()


def test_batches_cycle_through_epochs() -> None:
    source = load_loader(f"{DATA}:make_loader")
    batches = source.batches(None, torch.device("cpu"))
    seen = [next(batches) for _ in range(20)]  # 8 batches per epoch
    assert torch.equal(seen[0].args[0], seen[8].args[0])
    source.close()


@pytest.mark.parametrize(
    ("reference", "error", "message"),
    [
        (f"{DATA}:not_a_loader", TorchwiseError, "returned list, not a torch.utils.data"),
        (f"{DATA}:broken_loader", UserCodeError, "loader_data.py:"),
        (f"{DATA}:missing", TorchwiseError, "has no attribute 'missing'"),
        ("nowhere/data.py:make", TorchwiseError, "file not found"),
        ("data_without_function", TorchwiseError, "is not 'file.py:name'"),
    ],
)
def test_bad_loaders_are_one_clear_error(reference: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_loader(reference)


def test_worker_candidates() -> None:
    assert worker_candidates(2) == [0, 1, 2, 4]
    assert worker_candidates(1) == [0, 1, 2]
    assert worker_candidates(64)[-1] == 16


def test_scan_loader_measures_every_setting() -> None:
    source = load_loader(f"{DATA}:make_loader")
    config = SessionConfig(min_rounds=2, max_rounds=3, warmup_steps=1, budget_s=1.0)
    scan = scan_loader(source, torch.device("cpu"), config, cores=1)
    assert set(scan.results) >= {LoaderSettings(), LoaderSettings(1, False, True, None)}
    assert all(r.samples for r in scan.results.values())
    assert scan.best in scan.results
