"""summarize(): never touches the caller's model; per-layer facts; memory arithmetic."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchwise.errors import TorchwiseError
from torchwise.model import summarize


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.5)
        self.frozen = nn.Linear(8, 8)
        self.head = nn.Linear(8, 4)
        for p in self.frozen.parameters():
            p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn(self.conv(x)).mean((2, 3))  # (B, 8)
        return self.head(self.drop(self.frozen(x)))  # (B, 4)


@pytest.mark.parametrize("device", ["meta", "cpu"])
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_caller_model_is_never_modified(device: str, mode: str) -> None:
    model = Small().train()
    calls: list[str] = []
    model.head.register_forward_hook(lambda *_: calls.append("hook"))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    hooks_before = {
        n: len(m._forward_hooks) + len(m._forward_pre_hooks) for n, m in model.named_modules()
    }
    summarize(model, (torch.randn(2, 3, 8, 8),), device=device, mode=mode)
    assert model.training and all(m.training for m in model.modules())
    assert all(p.device.type == "cpu" and p.grad is None for p in model.parameters())
    after = model.state_dict()
    assert all(torch.equal(state[k], after[k]) for k in state)  # incl. BN running stats
    assert {
        n: len(m._forward_hooks) + len(m._forward_pre_hooks) for n, m in model.named_modules()
    } == hooks_before
    assert not model.frozen.weight.requires_grad and model.head.weight.requires_grad


def test_layer_rows_carry_shapes_params_and_trainability() -> None:
    summary = summarize(Small(), (torch.randn(2, 3, 8, 8),), estimate_training=False)
    rows = {layer.name: layer for layer in summary.layers}
    assert rows[""].type_name == "Small" and rows[""].output_shapes == [(2, 4)]
    assert rows["conv"].input_shapes == [(2, 3, 8, 8)] and rows["conv"].output_shapes == [
        (2, 8, 8, 8)
    ]
    assert rows["conv"].params_own == 8 * 3 * 9 + 8  # 224
    # 2 FLOPs x batch 2 x 8*8 positions x cout 8 x cin 3 x 3*3 kernel
    assert rows["conv"].flops == 2 * 2 * (8 * 8) * 8 * 3 * 9
    assert rows["frozen"].trainable is False and rows["head"].trainable is True
    assert rows["drop"].trainable is None
    assert rows[""].trainable is False and rows[""].params_trainable == 224 + 16 + 36
    assert summary.total_params == 224 + 16 + 72 + 36  # conv, bn, frozen, head
    assert summary.trainable_params == summary.total_params - 72
    assert summary.buffer_count == 3  # running_mean, running_var, num_batches_tracked
    assert rows["conv"].depth == 1 and rows[""].depth == 0


def test_depth_filters_rows() -> None:
    net = nn.Sequential(nn.Sequential(nn.Linear(2, 2)), nn.ReLU())
    summary = summarize(net, (torch.randn(1, 2),), depth=1, estimate_training=False)
    assert [layer.name for layer in summary.layers] == ["", "0", "1"]


def test_shared_module_called_twice_counts_both_calls() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.fc(x))

    summary = summarize(Twice(), (torch.randn(3, 4),), estimate_training=False)
    fc = next(layer for layer in summary.layers if layer.name == "fc")
    assert fc.calls == 2 and fc.flops == 2 * (2 * 3 * 4 * 4)


def test_training_memory_arithmetic() -> None:
    # Linear(4 -> 3): 15 float32 params = 60 bytes; output (2, 3) float32 = 24 bytes.
    summary = summarize(nn.Linear(4, 3), (torch.randn(2, 4),), mode="train")
    assert summary.training is not None
    t = summary.training
    assert (t.weights, t.gradients, t.optimizer["adam"], t.optimizer["sgd"]) == (60, 60, 120, 0)
    assert t.activations == 24
    assert t.loss_backward == 3 * 24  # the loss's log-probabilities, their gradient, the output's
    assert t.total("adam") == 60 + 60 + 120 + 24 + 72


def test_activation_peak_counts_storages_not_views() -> None:
    class Views(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2  # new (64, 64) float32: 16 KiB
            return y.view(-1).t()[:10]  # views of y: nothing new

    summary = summarize(Views(), (torch.randn(64, 64),), estimate_training=False)
    assert summary.peak_activation_bytes == 64 * 64 * 4


def test_param_memory_by_dtype() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4).to(torch.bfloat16))
    summary = summarize(model, (torch.randn(1, 4),), device="meta", estimate_training=False)
    # meta has no bf16/f32 mismatch check, so the forward runs; memory is per dtype
    assert summary.param_bytes_by_dtype == {"float32": 20 * 4, "bfloat16": 20 * 2}


def test_meta_failure_falls_back_to_cpu_and_says_so() -> None:
    class DataDependent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) if x.sum().item() < 1e9 else x

    summary = summarize(DataDependent(), (torch.randn(2, 4),), estimate_training=False)
    assert summary.device_used == "cpu" and summary.macs_forward == 2 * 4 * 4
    assert any("meta-device forward failed" in note for note in summary.notes)


def test_cpu_constants_in_forward_fall_back_to_fake_tensors() -> None:
    class CpuConstant(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * torch.ones(4)  # a CPU tensor: meta cannot mix it in

    model = CpuConstant().to("meta")  # shape-only weights: no real fallback exists
    summary = summarize(model, (torch.randn(2, 4),), estimate_training=False)
    assert summary.device_used == "cpu (fake tensors)" and summary.macs_forward == 2 * 4 * 4
    assert summary.unsupported_ops == {}
    assert any("measured with fake tensors" in note for note in summary.notes)


def test_forward_error_names_submodule_and_shapes() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Linear(7, 2)))
    with pytest.raises(TorchwiseError) as info:
        summarize(model, (torch.randn(2, 4),), estimate_training=False)
    message = str(info.value)
    assert "forward of Sequential raised in 1.0 (Linear)" in message
    assert "it received float32[2, 8]" in message


def test_bad_mode_is_an_error() -> None:
    with pytest.raises(TorchwiseError, match="mode must be"):
        summarize(nn.Linear(2, 2), (torch.randn(1, 2),), mode="training")


def test_to_dict_is_json_ready() -> None:
    import json

    summary = summarize(nn.Linear(2, 3), (torch.randn(1, 2),))
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["schema_version"] == 1 and data["layers"][0]["output_shapes"] == [[1, 3]]


def test_fallback_notes_quote_one_short_line_without_tensor_reprs() -> None:
    from torchwise.model.summary import _reason
    from torchwise.model.trace import ForwardError

    error = ForwardError("forward of Net raised")
    error.__cause__ = RuntimeError(
        "Please convert all Tensors to FakeTensors first. Found in aten.addmm.default("
        "tensor([[0.1, 0.2],\n        [0.3, 0.4]]), FakeTensor(..., size=(2, 2)))"
    )
    reason = _reason(error)
    assert reason == (
        "RuntimeError: Please convert all Tensors to FakeTensors first. Found in "
        "aten.addmm.default ..."
    )
    assert "\n" not in reason and "0.1" not in reason
