"""The baseline profile: host-device syncs traced to the user's line, top operators, phases."""

from __future__ import annotations

import inspect

import torch
from conftest import TinyMLP, workload
from torch import nn

from torchwise.tune.profile import PHASES, profile_step, sync_sites
from torchwise.tune.step import TrainingStep


class Syncing(nn.Module):
    """A forward that waits for the device twice a step: ``.item()`` and a mask index."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.abs().max().item()  # sync: a value read back to the host
        h = self.fc(x / scale)  # (B, 4)
        positive = h[h > 0]  # sync: a boolean mask's output size depends on the data
        return h + positive.sum()


def _line(marker: str) -> int:
    lines, start = inspect.getsourcelines(Syncing.forward)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def warmed(model: nn.Module, x: torch.Tensor) -> TrainingStep:
    torch.manual_seed(0)
    step = TrainingStep(workload(model, x))
    with step.scope():
        step.run(2)
    return step


def test_each_sync_is_traced_to_the_users_line() -> None:
    sites = {s.op: s for s in sync_sites(warmed(Syncing(), torch.randn(6, 8)))}
    assert set(sites) == {"_local_scalar_dense", "index", "index_put"}, sites
    item, mask, backward = sites["_local_scalar_dense"], sites["index"], sites["index_put"]
    assert item.where == [f"{__file__}:{_line('.item()')}"]
    assert mask.where == [f"{__file__}:{_line('h[h > 0]')}"]
    # The mask index's backward scatters through the same mask: issued by autograd,
    # not by a line of the forward.
    assert backward.where == ["autograd (the backward of an op above)"]
    assert item.per_step == mask.per_step == backward.per_step == 1
    assert "item()" in item.cause and "boolean mask" in mask.cause


def test_a_step_without_syncs_has_none_and_adams_step_counter_is_exempt() -> None:
    # The for-loop AdamW reads its host-side ``step`` counter with .item(); that
    # tensor never lives on the device, so it never waits for it.
    step = warmed(TinyMLP(), torch.randn(8, 16))
    assert isinstance(step.optimizer, torch.optim.AdamW)
    assert sync_sites(step) == []


def test_the_profile_splits_the_step_and_names_its_operators() -> None:
    profile = profile_step(warmed(TinyMLP(), torch.randn(8, 16)), phase_steps=2, profile_steps=1)
    assert set(profile.phases) == set(PHASES)
    assert all(seconds >= 0 for seconds in profile.phases.values())
    assert profile.phase_total > 0
    names = {op.name for op in profile.top_ops}
    assert "aten::addmm" in names, names
    assert profile.cuda_syncs is None  # counted by torch.cuda's debug mode, on CUDA only
