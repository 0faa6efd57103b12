"""Reproducibility: judged from values and generator states, not from where calls are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from run_helpers import codes

Run = Callable[..., dict[str, Any]]


def test_a_model_built_before_the_seed_then_loaded_is_seeded_enough(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    torch.save(nn.Linear(4, 2).state_dict(), "init.pt")
    model = nn.Linear(4, 2)
    torch.manual_seed(0)
    model.load_state_dict(torch.load("init.pt"))  # the weights come from the file
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert codes(run(source)) == []


def test_a_script_that_never_seeds_is_not_judged(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert codes(run(source)) == []


def test_persistent_workers_with_a_shared_generator_still_duplicate(run: Run) -> None:
    source = """
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Noisy(Dataset):
        def __init__(self):
            self.augment = {"rng": None}
            self.state = np.random.RandomState(0)

        def __len__(self):
            return 32

        def __getitem__(self, index):
            return torch.tensor([float(index) + self.state.randn()])


    if __name__ == "__main__":
        model = torch.nn.Linear(1, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(Noisy(), batch_size=4, num_workers=2, persistent_workers=True)
        for x in loader:
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    result = run(source)
    found = [f for f in result["findings"] if f["code"] == "TWR502"]
    assert len(found) == 1 and found[0]["line"] == 10  # self.state = np.random.RandomState(0)


def test_a_process_the_script_starts_itself_is_said_to_be_unchecked(run: Run) -> None:
    source = """
    import multiprocessing
    import time

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    for batch in DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=2, num_workers=1):
        pass  # a DataLoader worker: torch's process, not the script's
    """
    assert not any("multiprocessing.Process" in n for n in run(source)["notes"])
    started = (
        source
        + """
    process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,))
    process.start()
    process.join()
    """
    )
    assert any("multiprocessing.Process" in n for n in run(started)["notes"])
