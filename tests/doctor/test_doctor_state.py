"""The state snapshot never mutates a mapping that forbids it (diffusers' FrozenDict)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NoReturn

import torch
from torch import nn

from torchwise.doctor import check
from torchwise.doctor.state import Snapshot


class Frozen(OrderedDict[str, Any]):
    """A config mapping that refuses changes, as diffusers' FrozenDict does; ``clear``
    is inherited, so a restore that clears then updates empties it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.frozen = True

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError("cannot update a frozen mapping")

    def __setitem__(self, key: str, value: Any) -> None:
        if getattr(self, "frozen", False):
            raise RuntimeError("cannot set an item of a frozen mapping")
        super().__setitem__(key, value)


class Configured(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.config = Frozen([("width", 4)])
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def test_doctor_runs_a_model_with_a_frozen_config() -> None:
    model = Configured()
    config = model.config
    report = check(model, torch.randn(4, 4), ["nan-inf", "param-update"])
    assert report.ok
    assert model.config is config and dict(config) == {"width": 4}


def test_restore_rebuilds_a_changed_frozen_mapping_without_emptying_it() -> None:
    model = Configured()
    config = model.config
    snapshot = Snapshot(model)
    dict.__setitem__(config, "width", 8)  # changed behind its back (by a forward, say)
    snapshot.restore()
    assert dict(model.config) == {"width": 4}
    assert dict(config) == {"width": 8}  # the original object was not cleared


def test_restore_refills_hook_dicts_in_place() -> None:
    model = Configured()
    hooks = model._forward_hooks
    handle = model.register_forward_hook(lambda *_: None)
    snapshot = Snapshot(model)
    model.register_forward_hook(lambda *_: None)
    snapshot.restore()
    assert model._forward_hooks is hooks and len(hooks) == 1
    handle.remove()
    assert len(hooks) == 0
