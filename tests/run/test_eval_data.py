"""Evaluation and data checks: what the program does, whatever its functions are called."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from run_helpers import codes

Run = Callable[..., dict[str, Any]]

SHARED_EPOCH = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
train_loader = DataLoader(data, batch_size=8, shuffle=True)
val_loader = DataLoader(data, batch_size=8)
model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def run_epoch(loader, train):
    model.train(train) if {switch} else None
    with torch.set_grad_enabled(train):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            if train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


for epoch in range(2):
    run_epoch(train_loader, True)
    run_epoch(val_loader, False)
"""


def test_a_shared_epoch_function_is_judged_on_its_evaluation_path(run: Run) -> None:
    result = run(SHARED_EPOCH.format(switch="True"))
    assert codes(result, serious=True) == []
    assert result["training_passes"] == 2 and result["evaluation_passes"] == 2
    buggy = run(SHARED_EPOCH.format(switch="False"))
    assert [(f["code"], f["line"]) for f in buggy["findings"]] == [("TWR201", 16)]  # its loop


def test_evaluation_of_a_model_without_dropout_or_batch_norm_is_clean(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():  # never model.eval(): nothing in it depends on the mode
        for batch in range(3):
            model(torch.randn(8, 4))
    """
    assert codes(run(source)) == []


def test_fine_tuning_in_eval_mode_from_the_start_is_not_a_lost_train_mode(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.1), nn.Linear(8, 2))
    model.eval()  # frozen statistics on purpose, for the whole run
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for step in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for batch in range(3):
                model(torch.randn(8, 4))
    """
    assert codes(run(source), serious=True) == []


def test_budget_ends_passes_and_epochs(run: Run) -> None:
    source = """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.randn(800, 4), torch.randint(0, 2, (800,)))
    train_loader = DataLoader(data, batch_size=8, shuffle=True)
    val_loader = DataLoader(data, batch_size=8)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = {"train": 0, "val": 0, "epochs": 0}
    for epoch in range(50):
        seen["epochs"] += 1
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen["train"] += 1
        with torch.no_grad():
            for x, y in val_loader:
                model(x)
                seen["val"] += 1
    """
    result = run(source, steps=4, eval_batches=2)
    # 4 steps in each of two epochs, then two short passes (2 batches) so that what
    # follows the loop would run, then the run ends at the fifth epoch
    assert result["steps"] == 4 + 4 + 2 + 2
    assert result["training_passes"] == 2 and result["evaluation_passes"] == 4
    assert "2 training passes" in result["stopped_by"]
    assert codes(result) == []


def test_distributed_sampler_without_set_epoch(run: Run) -> None:
    source = """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        {set_epoch}
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    buggy = run(source.replace("{set_epoch}", "pass"))
    assert [(f["code"], f["line"]) for f in buggy["findings"]] == [("TWR301", 14)]
    fixed = run(source.replace("{set_epoch}", "sampler.set_epoch(epoch)"))
    assert codes(fixed) == []


def test_hand_written_loss_that_broadcasts(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randn(8)
        loss = ((model(x){fix} - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    buggy = run(source.replace("{fix}", ""))
    assert [(f["code"], f["line"]) for f in buggy["findings"]] == [("TWR302", 11)]
    assert codes(run(source.replace("{fix}", ".squeeze(1)"))) == []


def test_label_ranges(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        y = torch.randint(0, 3, (8,))
        y[0] = -100  # padding, ignored
        loss = nn.functional.cross_entropy(model(x), y)
        loss = loss + nn.functional.binary_cross_entropy_with_logits(model(x)[:, 0], {target})
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert codes(run(source.replace("{target}", "(y > 0).float()"))) == []
    buggy = run(source.replace("{target}", "y.clamp(min=0).float()"))
    assert [(f["code"], f["line"]) for f in buggy["findings"]] == [("TWR303", 12)]


def test_a_batch_taken_once_outside_the_loop(run: Run) -> None:
    source = """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,))), batch_size=8)
    x, y = next(iter(loader))
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert [(f["code"], f["line"]) for f in run(source)["findings"]] == [("TWR304", 11)]


def test_full_batch_training_on_a_fixed_tensor_is_deliberate(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))  # the whole dataset, every step
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert codes(run(source)) == []


GREEDY_ACTIONS = """
import torch
from torch import nn

policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
for step in range(3):
    loss = policy(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
for state in range(4):
    action = policy(torch.randn({shape})).argmax().item()
"""


def test_evaluation_with_grad_is_a_warning_for_batches_and_a_hint_for_single_samples(
    run: Run,
) -> None:
    batches = run(GREEDY_ACTIONS.format(shape="32, 4"))
    assert [(f["code"], f["severity"]) for f in batches["findings"]] == [("TWR202", "warning")]
    single = run(GREEDY_ACTIONS.format(shape="4"))
    assert [(f["code"], f["severity"]) for f in single["findings"]] == [("TWR202", "info")]
    assert codes(single, serious=True) == []


WORKER_TRANSFORMS = """
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Scale(nn.Module):  # a transform that is an nn.Module, as torchvision's are
    def forward(self, x):
        return x * 0.5


class Items(Dataset):
    def __init__(self):
        self.transform = Scale()

    def __len__(self):
        return 1024

    def __getitem__(self, index):
        return self.transform(torch.randn(4)), index % 2


model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(Items(), batch_size=128, shuffle=True, num_workers=2)
test = DataLoader(Items(), batch_size=128, num_workers=2)
for x, y in train:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    model.eval()
    correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in test)
"""


def test_transforms_in_dataloader_workers_are_not_model_calls(run: Run) -> None:
    """Each worker applies its transform (an nn.Module) to every item; those calls are
    neither the program's model calls nor a sampling loop that ends the run."""
    result = run(WORKER_TRANSFORMS, steps=3, epochs=1)
    assert codes(result, serious=True) == []
    assert result["stopped_by"] == "" and result["evaluation_passes"] == 1


SHARED_HELPER = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def one_batch(x, y):
    return nn.functional.cross_entropy(model(x), y)


def validate():
    with torch.no_grad():
        for x, y in DataLoader(data, batch_size=16):
            one_batch(x, y)


for x, y in DataLoader(data, batch_size=16, shuffle=True):
    loss = one_batch(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
validate()
"""


def test_an_evaluation_finding_names_the_evaluation_loop_not_a_shared_helper(run: Run) -> None:
    result = run(SHARED_HELPER)
    (found,) = [f for f in result["findings"] if f["code"] == "TWR201"]
    assert found["line"] == 17  # `for x, y in DataLoader(...)` in validate()
    assert found["data"]["model called at"].endswith("script.py:12")


VALIDATE_THEN_TEST = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def one_batch(x, y):
    return nn.functional.cross_entropy(model(x), y)


def validate():
    model.eval()
    with torch.no_grad():
        for x, y in DataLoader(data, batch_size=16):
            one_batch(x, y)
    model.train()


def test():
    with torch.no_grad():
        for x, y in DataLoader(data, batch_size=16):
            one_batch(x, y)


for x, y in DataLoader(data, batch_size=16, shuffle=True):
    loss = one_batch(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
validate()
test()
"""


def test_the_loop_reported_is_the_one_that_ran_in_train_mode(run: Run) -> None:
    """validate() and test() share one model call; only test() forgot eval()."""
    (found,) = [f for f in run(VALIDATE_THEN_TEST)["findings"] if f["code"] == "TWR201"]
    assert found["line"] == 25  # test()'s loop, not validate()'s at line 18
