"""torchwise.hooks.module_calls: the one module-hook stack."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchwise.hooks import ModuleCall, module_calls


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x))


def test_stack_order_and_hooks_removed() -> None:
    net = Net()
    seen: list[tuple[str, list[str]]] = []
    outs: list[tuple[str, tuple[int, ...]]] = []

    def entered(call: ModuleCall) -> None:
        seen.append((call.name, list(stack.stack)))

    def returned(call: ModuleCall, out: torch.Tensor) -> None:
        outs.append((call.name, tuple(out.shape)))

    with module_calls(net, on_enter=entered, on_exit=returned) as stack:
        net(torch.randn(3, 4))
    assert seen == [
        ("", [""]),
        ("block", ["", "block"]),
        ("block.0", ["", "block", "block.0"]),
        ("block.1", ["", "block", "block.1"]),
        ("head", ["", "head"]),
    ]
    assert [name for name, _ in outs] == ["block.0", "block.1", "block", "head", ""]
    assert stack.stack == [] and stack.failed is None
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())


def test_failed_names_the_innermost_call_and_its_inputs() -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Linear(7, 2)))
    exits: list[str] = []
    record_exit = lambda call, _: exits.append(call.name)  # noqa: E731
    with module_calls(net, on_exit=record_exit) as stack, pytest.raises(RuntimeError):
        net(torch.randn(2, 4))
    assert stack.failed is not None and stack.failed.name == "1.0"
    assert stack.failed.args[0].shape == (2, 8)
    assert exits == ["0"]  # no on_exit for the calls that raised
    assert stack.stack == []


def test_a_caught_error_is_forgotten_when_the_model_goes_on() -> None:
    class Fallback(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fast = nn.Linear(3, 3)
            self.slow = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            try:
                return self.fast(x)  # wrong width: raises, caught below
            except RuntimeError:
                return self.slow(x)

    model = Fallback()
    with module_calls(model) as stack:
        model(torch.randn(1, 4))
    assert stack.failed is None


def test_only_hooks_the_named_modules() -> None:
    net = Net()
    names: list[str] = []
    with module_calls(net, on_enter=lambda call: names.append(call.name), only={"head"}):
        net(torch.randn(1, 4))
    assert names == ["head"]
