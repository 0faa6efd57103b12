"""Planted bugs for bench/doctor_suite.py, on top of the suite's real models.

Each takes a healthy case of doctor_suite_cases.py and adds a bug people really make,
the way they make it: a config value (keep-prob dropout, a huge init range), a freeze
left in place, the user's own loss or wrapper code (a forward hook stands in for the
user's wrapper around the library model), or an edit of the model's own code (an
instance method replaced with the edited copy). ``check`` is the check meant to
catch it; the bench counts it caught when that check warns or fails.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Planted:
    name: str
    base: str  # the healthy case it starts from
    check: str
    bug: str
    plant: Callable[[nn.Module], Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)  # init kwargs changed


def _first(out: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``fn`` applied to the first tensor of a module's output (tensor or tuple)."""
    if isinstance(out, torch.Tensor):
        return fn(out)
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
        return (fn(out[0]), *out[1:])
    return out


def hook(module: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    module.register_forward_hook(lambda m, args, out: _first(out, fn))


def _detach(model: nn.Module) -> None:
    hook(model.backbone.layers[0].mixer, lambda t: t.detach())


def _time_mean(model: nn.Module) -> None:
    # a "context" feature: the mean over the sequence, added back at every position
    hook(model.model.layers[0], lambda t: t + t.mean(1, keepdim=True))


def _chomp_front(model: nn.Module) -> None:
    # Chomp1d trims the padding from the wrong end: the convolution sees the future
    for module in model.modules():
        if type(module).__name__ == "Chomp1d":
            module.register_forward_hook(
                lambda m, args, out: args[0][:, :, m.chomp_size :].contiguous()
            )


def _center_over_batch(model: nn.Module) -> None:
    hook(model.visual_projection, lambda t: t - t.mean(0, keepdim=True))


def _batch_stats(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.track_running_stats = False
            module.running_mean = module.running_var = None


def _dropout_in_eval(model: nn.Module) -> None:
    hook(model.wav2vec2.feature_projection, lambda t: F.dropout(t, 0.1))  # no training=


def _softmax_head(model: nn.Module) -> None:
    hook(model.classifier, lambda t: t.softmax(-1))


def _log(model: nn.Module) -> None:
    hook(model.model.layers[0].mlp, torch.log)


def _sqrt_scale(model: nn.Module) -> None:
    layer = model.model.decoder.layers[1].fc2
    layer.scale = nn.Parameter(torch.zeros(4))
    hook(layer, lambda t: t * (1 + torch.sqrt((layer.scale**2).sum())))


def _dead_stage(model: nn.Module) -> None:
    for module in model.regnet.encoder.stages[1].modules():
        if isinstance(module, nn.BatchNorm2d):
            nn.init.constant_(module.bias, -10.0)


def _numpy_noise(model: nn.Module) -> None:
    def noisy(m: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        if not m.training:
            return out
        noise = np.random.normal(0, 0.1, tuple(out.shape)).astype("float32")
        return out + torch.from_numpy(noise)

    model.encoder.embed_tokens.register_forward_hook(noisy)


def _cpu_tensor(model: nn.Module) -> None:
    hook(model.lm_head, lambda t: t + torch.zeros(t.shape[-1]))


def _plain_list_adapters(model: nn.Module) -> None:
    layers = model.backbone.layers
    model.adapters = [nn.Linear(32, 32) for _ in layers]
    for layer, adapter in zip(layers, model.adapters, strict=True):
        hook(layer, lambda t, a=adapter: t + a(t))


def _branch_on_values(model: nn.Module) -> None:
    hook(model.lm_head, lambda t: t * 2 if t.mean() > 0 else t)


def _distance_head(model: nn.Module) -> None:
    head = model.classifier
    head.protos = nn.Parameter(torch.randn(5, head.in_features) * 0.1 + 3.0)

    def distances(m: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        e = F.relu(args[0]) + 3.0  # (B, D)
        d2 = (e**2).sum(-1, keepdim=True) + (m.protos**2).sum(-1) - 2 * e @ m.protos.T
        return -d2  # (B, 5)

    head.register_forward_hook(distances)


def _loss_over_time(model: nn.Module) -> None:
    def loss(logits: torch.Tensor, labels: torch.Tensor, vocab_size: int, **_: Any) -> Any:
        logp = F.log_softmax(logits[:, :-1].float(), dim=1)  # over time, not the vocabulary
        return F.nll_loss(logp.reshape(-1, vocab_size), labels[:, 1:].reshape(-1))

    model.loss_function = loss


def _buffer_weight(model: nn.Module) -> None:
    layer = model.classifier[1]
    weight = layer.weight.detach().clone()
    del layer.weight
    layer.register_buffer("weight", weight)


def _residual_twice(model: nn.Module) -> None:
    for layer in model.model.layers:
        layer.register_forward_hook(
            lambda m, args, out: _first(out, lambda t, x=args[0]: t + x) if args else out
        )


def _copied_tie(model: nn.Module) -> None:
    model.lm_head.weight = nn.Parameter(model.model.embed_tokens.weight.detach().clone())


def _attention_over_queries(model: nn.Module) -> None:
    def forward(self: nn.Module, qkv: torch.Tensor) -> torch.Tensor:
        ch = qkv.shape[1] // 3
        q, k, v = torch.split(qkv, ch, dim=1)
        scale = 1 / math.sqrt(math.sqrt(ch))
        weight = torch.einsum("bct,bcs->bts", q * scale, k * scale)
        weight = torch.softmax(weight.float(), dim=1).type(weight.dtype)  # BUG: dim=-1
        return torch.einsum("bts,bcs->bct", weight, v)

    for module in model.modules():
        if type(module).__name__ == "QKVAttention":
            module.forward = types.MethodType(forward, module)


def _probabilities(model: nn.Module) -> None:
    hook(model.lm_head, lambda t: t.softmax(-1))


def _frozen(path: str) -> Callable[[nn.Module], None]:
    def freeze(model: nn.Module) -> None:
        model.get_submodule(path).requires_grad_(False)

    return freeze


PLANTED: list[Planted] = [
    Planted("whisper-frozen-decoder-layer", "whisper", "param-update",
            "a decoder layer left frozen after a warm-up", _frozen("model.decoder.layers.0")),
    Planted("qwen3-moe-frozen-experts", "qwen3-moe", "param-update",
            "one layer's experts frozen by mistake", _frozen("model.layers.0.mlp.experts")),
    Planted("mamba-detached-mixer", "mamba", "grad-flow",
            "a mixer's output detached in a wrapper", _detach),
    Planted("gemma2-time-mean", "gemma2", "causal-leak",
            "a sequence mean added back at every position", _time_mean),
    Planted("tcn-chomp-front", "TCN char model", "causal-leak",
            "Chomp1d trims the padding from the front", _chomp_front),
    Planted("clip-center-over-batch", "clip", "batch-independence",
            "image embeddings centred over the batch", _center_over_batch),
    Planted("segformer-batch-stats", "segformer", "batch-independence",
            "BatchNorm with track_running_stats=False", _batch_stats),
    Planted("wav2vec2-dropout-in-eval", "wav2vec2-ctc", "eval-determinism",
            "F.dropout without training= in a wrapper", _dropout_in_eval),
    Planted("dit-keep-prob", "dit", "train-eval-gap", "dropout=0.9 meant as keep_prob",
            config={"dropout": 0.9}),
    Planted("yolos-exploding-init", "yolos", "init-loss", "initializer_range=1.0",
            config={"initializer_range": 1.0}),
    Planted("regnet-softmax-head", "regnet", "init-loss",
            "softmax on the logits before the loss", _softmax_head),
    Planted("olmoe-log-activations", "olmoe", "nan-inf",
            "log of a MoE block's output", _log),
    Planted("bart-sqrt-at-zero", "bart", "nan-inf",
            "sqrt of a zero-initialised scale", _sqrt_scale),
    Planted("regnet-dead-stage", "regnet", "dead-units",
            "BatchNorm biases of a stage set to -10", _dead_stage),
    Planted("switch-numpy-noise", "switch-transformers", "determinism",
            "np.random noise on the embeddings", _numpy_noise),
    Planted("qwen2-moe-cpu-tensor", "qwen2-moe", "device-consistency",
            "torch.zeros(n) without device= in a wrapper", _cpu_tensor),
    Planted("mamba2-plain-list-adapters", "mamba2", "device-consistency",
            "adapters kept in a Python list", _plain_list_adapters),
    Planted("speech2text-branch-on-values", "speech2text", "exportable",
            "Python if on a tensor's value", _branch_on_values),
    Planted("mobilevit-distance-head", "mobilevit", "amp-drift",
            "distances expanded as |a|^2 + |b|^2 - 2ab", _distance_head),
    Planted("gemma2-loss-over-time", "gemma2", "init-loss",
            "a custom loss_function with log_softmax over time", _loss_over_time),
    Planted("regnet-buffer-weight", "regnet", "wiring",
            "the classifier's weight registered as a buffer", _buffer_weight),
    Planted("qwen2-moe-residual-twice", "qwen2-moe", "wiring",
            "a wrapper adds each layer's input again", _residual_twice),
    Planted("gemma2-copied-tie", "gemma2", "wiring",
            "lm_head a copy of the tied embeddings", _copied_tie),
    Planted("improved-diffusion-attention-axis", "improved-diffusion UNet", "wiring",
            "QKVAttention's softmax over the queries", _attention_over_queries),
    Planted("mamba-minimal-softmax-output", "mamba-minimal", "overfit-batch",
            "softmax on the logits before cross-entropy", _probabilities),
]  # fmt: skip
