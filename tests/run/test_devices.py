"""``--as-cuda``: what would fail on a GPU fails here, and what works there works here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from run_helpers import codes

Run = Callable[..., dict[str, Any]]

CLEAN = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

assert torch.cuda.is_available() and torch.cuda.device_count() == 1
device = torch.device("cuda")
print(torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory)
# what torch 2.11's Adam asks before each step (it crashed the simulation there)
assert not torch.cuda.is_current_stream_capturing()
assert not torch.cuda.graphs.is_current_stream_capturing()
data = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 4, (64,)))
loader = DataLoader(data, batch_size=8, shuffle=True, pin_memory=True)
model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Dropout(0.1), nn.Linear(8, 4),
).cuda()
assert next(model.parameters()).is_cuda and next(model.parameters()).device.type == "cuda"
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cuda")
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for epoch in range(2):
    model.train()
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device)
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y) * torch.tensor(1.0)  # a CPU scalar
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        mask = torch.ones(8, device=x.device)
        top = logits[torch.arange(8), y]  # CPU index on a CUDA tensor: allowed
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            correct = (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
            probabilities = model(x.cuda()).softmax(1).cpu().numpy()
end.record()
torch.cuda.synchronize()
print(start.elapsed_time(end))
torch.save(model.state_dict(), "model.pt")
state = torch.load("model.pt", map_location="cuda")
model.load_state_dict(state)
"""


def test_a_correct_gpu_script_runs_clean(run: Run) -> None:
    result = run(CLEAN, as_cuda=True)
    assert result["exit_status"] in (0, None), result
    assert codes(result, serious=True) == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("out = model(x)", "TWR401"),  # the input never moved
        ("out = model(x.cuda()) + torch.randn(8, 2)", "TWR401"),
        ("out = torch.cat([model(x.cuda()), torch.zeros(8, 2)])", "TWR401"),
        ("out = model(x.cuda()) * torch.tensor(2.0)", None),  # a 0-dim CPU tensor is fine
        ("out = model(x.cuda()); out.detach().numpy()", "TWR402"),
        ("out = model(x.cuda()); out.detach().cpu().numpy()", None),
        ("out = model.cpu()(x)", None),
    ],
)
def test_device_lines(line: str, expected: str | None, run: Run) -> None:
    source = f"""
    import torch
    from torch import nn

    model = nn.Linear(4, 2).to("cuda")
    x = torch.randn(8, 4)
    {line}
    """
    found = codes(run(source, as_cuda=True), serious=True)
    assert found == ([expected] if expected else [])


def test_a_model_never_moved(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(8, 4).cuda()
    loss = model(x).sum()
    """
    result = run(source, as_cuda=True)
    found = [f for f in result["findings"] if f["code"] == "TWR401"]
    assert len(found) == 1 and found[0]["line"] == 7
    assert "cuda:0 (8, 4)" in found[0]["data"]["tensors"]
    assert "cpu (8, 4)" in found[0]["data"]["tensors"]  # the weight


def test_gpus_sets_the_simulated_device_count(run: Run) -> None:
    source = """
    import torch
    assert torch.cuda.device_count() == 4, torch.cuda.device_count()
    torch.cuda.set_device(3)
    assert torch.zeros(1, device="cuda").device == torch.device("cuda:3")
    """
    assert run(source, as_cuda=True, gpus=4)["exit_status"] == 0
    assert run(source, as_cuda=True)["exit_status"] == 1  # one GPU per rank by default


def test_without_as_cuda_nothing_is_simulated(run: Run) -> None:
    source = """
    import torch
    assert not torch.cuda.is_available()
    """
    assert run(source)["exit_status"] == 0


def test_data_parallel_and_compile_run_on_the_simulated_device(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    layers = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    model = torch.compile(nn.DataParallel(layers))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8,)).cuda()
        loss = nn.functional.cross_entropy(model(x), y)  # DataParallel moves x itself
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    result = run(source, as_cuda=True)
    assert result["exit_status"] == 0 and result["steps"] == 3
    assert codes(result, serious=True) == []
    assert any("torch.compile" in note for note in result["notes"])


ORIGINS = """
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Positions(nn.Module):
    def __init__(self, width):
        super().__init__()
        table = torch.zeros(1, 16, width)
        {keep}


    def forward(self, x):
        return x + self.table[:, : x.size(1)]


model = nn.Sequential(Positions(4), nn.Linear(4, 2)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 5, 4)), batch_size=4)
for (x,) in loader:
    x = x.float()
    loss = model(x.cuda()).mean() + model[1](x).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    state = torch.from_numpy(np.zeros((1, 4), dtype=np.float32)).unsqueeze(0)
    model[1](state)
"""


def test_a_mismatch_names_where_each_tensor_came_from(run: Run) -> None:
    """The line to fix is where the CPU tensor was made or the CUDA one moved,
    not the operation that meets them: each tensor's origin is in the evidence."""
    result = run(ORIGINS.format(keep="self.table = table"), as_cuda=True)
    evidence = {
        f["line"]: f["data"]["tensors"] for f in result["findings"] if f["code"] == "TWR401"
    }
    assert set(evidence) == {16, 24, 29}
    assert "Positions.table, a plain tensor attribute set at script.py:12" in evidence[16]
    assert "register_buffer" in evidence[16]
    assert "moved to cuda:0 at script.py:24" in evidence[16]
    assert "a batch of the DataLoader at script.py:22, handled at script.py:23" in evidence[24]
    assert "moved to cuda:0 at script.py:19" in evidence[24]
    assert "created at script.py:28" in evidence[29]
    fixed = run(ORIGINS.format(keep='self.register_buffer("table", table)'), as_cuda=True)
    assert sorted(f["line"] for f in fixed["findings"] if f["code"] == "TWR401") == [24, 29]


def test_a_nan_run_on_the_simulated_gpu_reports_the_nan_and_no_device_error(run: Run) -> None:
    """The checks' own arithmetic on weights (a NaN replay, the soft-update check) runs
    outside the simulated devices: it must not turn into a device mismatch."""
    source = """
    import torch
    from torch import nn

    device = torch.device("cuda")
    model = nn.Sequential(nn.Linear(4, 16), nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(4):
        out = model(torch.randn(8, 4, device=device))
        loss = torch.sqrt(out - 10).mean()  # the square root of negatives: NaN
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    found = codes(run(source, as_cuda=True), serious=True)
    assert "TWR110" in found and "TWR401" not in found
