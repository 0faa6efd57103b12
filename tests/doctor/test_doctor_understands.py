"""Verdicts that understand the model: structured inputs, output kinds, training-time
randomness, deliberate freezing, eval-mode caches, meta-kernel gaps (minimal models)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from torchwise.doctor import Status, check


def flagged(report: Any) -> list[tuple[str, str, str]]:
    return [(r.id, r.status.value, r.summary) for r in report if r.status in (
        Status.FAIL, Status.WARN)]  # fmt: skip


class GCN(nn.Module):
    """Two graph convolutions over one graph: nodes mix through the adjacency by design."""

    def __init__(self) -> None:
        super().__init__()
        self.w1, self.w2 = nn.Linear(8, 16), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return self.w2(adj @ F.relu(self.w1(adj @ x)))  # (N, 3)


def graph() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    adj = torch.eye(10) + torch.diag(torch.ones(9), 1) + torch.diag(torch.ones(9), -1)
    return torch.randn(10, 8, generator=gen), adj / adj.sum(1, keepdim=True)


def test_a_graph_has_no_batch_to_keep_apart() -> None:
    torch.manual_seed(0)
    checks = ["grad-flow", "batch-independence", "init-loss", "nan-inf"]
    report = check(GCN(), graph(), checks, batch_dim=None)
    assert report["batch-independence"].status is Status.SKIP
    assert "no batch dim" in report["batch-independence"].summary
    assert flagged(report) == []
    assert any("no batch dim" in note for note in report.notes)
    # with the node dim taken as a batch the same model mixes "samples": the reason to say so
    mixed = check(GCN(), graph(), ["batch-independence"])
    assert mixed["batch-independence"].status is Status.FAIL


class TinyCLIP(nn.Module):
    """Image and text towers and a (B, B) similarity matrix, as CLIP returns."""

    def __init__(self, center: bool = False) -> None:
        super().__init__()
        self.image, self.text = nn.Linear(12, 8), nn.Embedding(20, 8)
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.center = center

    def forward(self, pixels: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        img = self.image(pixels)
        if self.center:
            img = img - img.mean(0, keepdim=True)  # BUG: depends on the other samples
        txt = self.text(ids).mean(1)
        img, txt = F.normalize(img, dim=-1), F.normalize(txt, dim=-1)
        return self.scale.exp() * img @ txt.T  # (B, B)


def clip_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(4, 12, generator=gen), torch.randint(0, 20, (4, 5), generator=gen)


def test_contrastive_logits_are_read_as_pairs() -> None:
    torch.manual_seed(0)
    report = check(TinyCLIP(), clip_inputs(), ["batch-independence", "init-loss", "overfit-batch"])
    assert "sample i matches sample i" in report.loss
    assert report["batch-independence"].status is Status.PASS
    assert report["init-loss"].status is Status.SKIP  # the temperature sets it, not classes
    assert report["overfit-batch"].status is Status.PASS
    torch.manual_seed(0)
    bug = check(TinyCLIP(center=True), clip_inputs(), ["batch-independence"])
    assert bug["batch-independence"].status is Status.FAIL


class Forecaster(nn.Module):
    """(B, T, C) history -> (B, H, C) forecast of the same channels."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(16, 4)

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        return self.mix(history.transpose(1, 2)).transpose(1, 2)  # (B, 4, C)


def test_a_forecast_is_regression_not_classes() -> None:
    report = check(Forecaster(), torch.randn(4, 16, 3), ["init-loss"])
    assert "forecast" in report.loss and "mse" in report.loss
    assert report["init-loss"].status is Status.SKIP


class OwnContrastiveLoss(TinyCLIP):
    def forward(self, pixels: torch.Tensor, ids: torch.Tensor, return_loss: bool = False) -> Any:
        logits = super().forward(pixels, ids)
        if not return_loss:
            return logits
        labels = torch.arange(len(logits))
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        return {"loss": loss, "logits": logits}


def test_a_return_loss_flag_is_the_models_own_loss() -> None:
    torch.manual_seed(0)
    report = check(OwnContrastiveLoss(), clip_inputs(), ["overfit-batch"])
    assert report.loss == "the model's own loss: forward(return_loss=True)"
    assert report["overfit-batch"].status is Status.PASS


class LayerDrop(nn.Module):
    """Each block is skipped at random in training (LayerDrop, stochastic depth)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            if self.training and torch.rand(()) < 0.5:
                continue
            x = x + F.relu(block(x))
        return self.head(x)


def test_layer_drop_is_not_an_unused_layer() -> None:
    torch.manual_seed(0)
    report = check(LayerDrop(), torch.randn(4, 8), ["grad-flow", "param-update"])
    assert flagged(report) == []
    assert report["grad-flow"].evidence.get("skipped_at_random_in_training")


class WithPositions(nn.Module):
    def __init__(self, freeze_layer: bool = False) -> None:
        super().__init__()
        table = torch.sin(torch.arange(6.0)[:, None] / 10 ** (torch.arange(8.0) / 8))
        self.pos_embed = nn.Parameter(table, requires_grad=False)  # fixed on purpose
        self.fc = nn.Linear(8, 4)
        self.fc.requires_grad_(not freeze_layer)
        self.out = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.fc(x + self.pos_embed).mean(1))  # (B, 3)


def test_a_fixed_position_table_is_frozen_on_purpose() -> None:
    report = check(WithPositions(), torch.randn(4, 6, 8), ["param-update"])
    assert report["param-update"].status is Status.PASS
    assert report["param-update"].evidence["fixed_position_tables"] == ["pos_embed"]
    frozen = check(WithPositions(freeze_layer=True), torch.randn(4, 6, 8), ["param-update"])
    assert frozen["param-update"].status is Status.WARN
    assert frozen["param-update"].where == ["fc"]


class EvalCache(nn.Module):
    """Caches a tensor computed from a parameter in eval mode, and drops it in train(), as
    timm's LeViT does with its attention biases."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.bias = nn.Parameter(torch.zeros(4))
        self.cache: dict[str, torch.Tensor] = {}

    def train(self, mode: bool = True) -> EvalCache:
        super().train(mode)
        if mode:
            self.cache = {}
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            bias = self.bias * 2
        else:
            bias = self.cache.setdefault("b", self.bias * 2)
        return self.fc(x) + bias


def test_an_eval_mode_cache_does_not_break_training_checks() -> None:
    torch.manual_seed(0)
    report = check(EvalCache(), torch.randn(4, 8), ["overfit-batch", "amp-drift"])
    assert flagged(report) == []


class MovedMask(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.mask = torch.ones(4)  # a plain attribute, moved by forward before use
        self.heads = [nn.Linear(4, 4), nn.Linear(4, 4)]
        for i, head in enumerate(self.heads):  # registered, as pyGAT registers its heads
            self.add_module(f"head_{i}", head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x) * self.mask.to(x.device)
        return sum(head(h) for head in self.heads)  # type: ignore[return-value]


def test_moved_plain_attributes_and_registered_lists_follow_the_device() -> None:
    report = check(MovedMask(), torch.randn(4, 8), ["device-consistency"])
    assert report["device-consistency"].status is Status.PASS


@torch.library.custom_op("torchwise_test::no_meta", mutates_args=())
def _no_meta(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class NoMetaKernel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _no_meta(self.fc(x))


def test_a_missing_meta_kernel_is_not_a_device_bug() -> None:
    result = check(NoMetaKernel(), torch.randn(4, 8))["device-consistency"]
    assert result.status is Status.SKIP and "could not check on meta" in result.summary
    # asked for by name, a check that cannot run says so as a warning, never a failure
    requested = check(NoMetaKernel(), torch.randn(4, 8), ["device-consistency"])
    assert requested["device-consistency"].status is Status.WARN


def test_the_same_seed_gives_the_same_numbers() -> None:
    def run(seed: int) -> dict[str, Any]:
        torch.manual_seed(123)
        model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 4))
        report = check(model, torch.randn(4, 8), ["init-loss", "amp-drift"], seed=seed)
        return {r.id: r.evidence for r in report}

    assert run(0) == run(0)
