"""Real third-party architectures at test size, healthy and with planted bugs.

Healthy cases (``HEALTHY``) are built from the installed libraries through
torchwise's own targets (``hf:NAME`` with a tiny config; diffusers through the same
``hf:`` fallback) or from torch's modules, plus the minimal reproductions in
``patterns.py``. Planted cases (``PLANTED``) take one of those models and add a
bug people really make, the way they make it: a config value (``is_decoder``
left False, ``initializer_range=1.0``, dropout 0.9 meant as keep_prob), a frozen
layer, or a forward hook standing in for the user's own wrapper code.

``bench/doctor_real_models.py`` runs every case and prints the false-alarm and
catch rates that docs/benchmarks.md quotes; ``test_doctor_real_models.py`` runs them as
tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from patterns import (
    GPT,
    FlattenedRNN,
    GPTConfig,
    MinGPT,
    RNNModel,
    SoftmaxLossGPT,
    TransformerLM,
    ZeroInitResNet,
)
from torch import nn

#: (model, positional inputs, keyword inputs, doctor options)
Built = tuple[nn.Module, tuple[Any, ...], dict[str, Any], dict[str, Any]]

B, T, V = 2, 8, 64  # batch, sequence length, vocabulary: as small as the checks allow
CAUSAL = {"causal_dim": 1}
TEXT = [f"input_ids=i64[{B},{T}]<{V}"]
IMAGE = [f"pixel_values=f32[{B},3,32,32]"]


@dataclass
class Case:
    name: str
    source: str  # where the architecture comes from
    build: Callable[[], Built]
    check: str = ""  # for a planted bug: the check meant to catch it
    bug: str = ""
    slow: bool = False  # above ~5 s of CPU on an idle 2-core machine
    tags: list[str] = field(default_factory=list)


def hf(
    target: str, config: dict[str, Any], inputs: list[str], **options: Any
) -> Callable[[], Built]:
    """A builder for ``hf:NAME`` with a config, through torchwise's own resolver."""

    def build() -> Built:
        from torchwise.target import resolve_target

        torch.manual_seed(0)
        rt = resolve_target(target, init_kwargs=json.dumps(config), inputs=inputs)
        return rt.model, rt.args, rt.kwargs, dict(options)

    return build


def planted(
    base: Callable[[], Built], plant: Callable[[nn.Module], Any], **extra: Any
) -> Callable[[], Built]:
    """``base`` with a bug planted into its model (and extra doctor options)."""

    def build() -> Built:
        model, args, kwargs, options = base()
        plant(model)
        return model, args, kwargs, {**options, **extra}

    return build


def local(make: Callable[[], nn.Module], *inputs: Any, **options: Any) -> Callable[[], Built]:
    def build() -> Built:
        torch.manual_seed(0)
        return make(), tuple(inputs), {}, dict(options)

    return build


def tokens(*shape: int, high: int = V) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(1))


LM_SIZE = {"num_hidden_layers": 2, "hidden_size": 32, "intermediate_size": 64,
           "num_attention_heads": 4, "vocab_size": V}  # fmt: skip
VISION_SIZE = {"num_hidden_layers": 2, "hidden_size": 32, "intermediate_size": 64,
               "num_attention_heads": 2, "image_size": 32, "patch_size": 8,
               "num_labels": 10}  # fmt: skip
ENCODER_SIZE = {"num_hidden_layers": 2, "hidden_size": 32, "intermediate_size": 64,
                "num_attention_heads": 2, "vocab_size": V}  # fmt: skip

gpt2 = hf("hf:GPT2LMHeadModel", {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": V,
                                 "n_positions": 32}, TEXT, **CAUSAL)  # fmt: skip
llama = hf("hf:LlamaForCausalLM", {**LM_SIZE, "num_key_value_heads": 2}, TEXT, **CAUSAL)
mistral = hf("hf:MistralForCausalLM", {**LM_SIZE, "num_key_value_heads": 2}, TEXT, **CAUSAL)
qwen2 = hf("hf:Qwen2ForCausalLM", {**LM_SIZE, "num_key_value_heads": 2}, TEXT, **CAUSAL)
gpt_neox = hf("hf:GPTNeoXForCausalLM", LM_SIZE, TEXT, **CAUSAL)
opt = hf("hf:OPTForCausalLM", {"num_hidden_layers": 2, "hidden_size": 32, "ffn_dim": 64,
                               "num_attention_heads": 4, "vocab_size": V,
                               "word_embed_proj_dim": 32, "max_position_embeddings": 32},
         TEXT, **CAUSAL)  # fmt: skip
bert = hf("hf:BertForSequenceClassification", {**ENCODER_SIZE, "num_labels": 3}, TEXT)
distilbert = hf("hf:DistilBertForSequenceClassification",
                {"n_layers": 2, "dim": 32, "hidden_dim": 64, "n_heads": 2, "vocab_size": V},
                TEXT)  # fmt: skip
roberta = hf("hf:RobertaForMaskedLM", ENCODER_SIZE, TEXT)
t5 = hf("hf:T5ForConditionalGeneration",
        {"num_layers": 2, "num_decoder_layers": 2, "d_model": 32, "d_ff": 64, "num_heads": 2,
         "d_kv": 16, "vocab_size": V},
        [f"input_ids=i64[{B},{T}]<{V}, decoder_input_ids=i64[{B},4]<{V}"])  # fmt: skip
vit = hf(
    "hf:ViTForImageClassification",
    VISION_SIZE,
    IMAGE,
)
resnet = hf("hf:ResNetForImageClassification",
            {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1],
             "layer_type": "basic", "num_labels": 10}, IMAGE)  # fmt: skip
convnext = hf("hf:ConvNextForImageClassification",
              {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2, "num_labels": 10},
              IMAGE)  # fmt: skip
unet = hf("hf:UNet2DModel",
          {"sample_size": 8, "block_out_channels": [8, 16], "norm_num_groups": 4,
           "down_block_types": ["DownBlock2D", "AttnDownBlock2D"],
           "up_block_types": ["AttnUpBlock2D", "UpBlock2D"], "layers_per_block": 1},
          [f"f32[{B},3,8,8], i64[{B}]<1000"])  # fmt: skip
vae = hf("hf:AutoencoderKL",
         {"block_out_channels": [8, 16], "latent_channels": 4, "norm_num_groups": 4,
          "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
          "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"], "layers_per_block": 1,
          "sample_size": 8},
         [f"f32[{B},3,8,8]"])  # fmt: skip

lstm_inputs = (tokens(T, B, high=50), (torch.zeros(2, B, 32), torch.zeros(2, B, 32)))
nanogpt = local(lambda: GPT(GPTConfig()), tokens(B, T), **CAUSAL)
mingpt = local(MinGPT, tokens(B, T), **CAUSAL)
lstm = local(RNNModel, *lstm_inputs, batch_dim=1)
transformer_lm = local(TransformerLM, tokens(T, B, high=50), causal_dim=0, batch_dim=1)
zero_init_resnet = local(ZeroInitResNet, torch.randn(B, 3, 16, 16))


HEALTHY: list[Case] = [
    Case("gpt2", "transformers GPT2LMHeadModel", gpt2),
    Case("llama", "transformers LlamaForCausalLM (GQA)", llama),
    Case("mistral", "transformers MistralForCausalLM", mistral, slow=True),
    Case("qwen2", "transformers Qwen2ForCausalLM", qwen2, slow=True),
    Case("gpt-neox", "transformers GPTNeoXForCausalLM", gpt_neox, slow=True),
    Case("opt", "transformers OPTForCausalLM", opt, slow=True),
    Case("bert", "transformers BertForSequenceClassification", bert),
    Case("distilbert", "transformers DistilBertForSequenceClassification", distilbert, slow=True),
    Case("roberta", "transformers RobertaForMaskedLM", roberta, slow=True),
    Case("t5", "transformers T5ForConditionalGeneration (encoder-decoder)", t5, slow=True),
    Case("vit", "transformers ViTForImageClassification", vit),
    Case("resnet", "transformers ResNetForImageClassification", resnet),
    Case("convnext", "transformers ConvNextForImageClassification", convnext, slow=True),
    Case("unet", "diffusers UNet2DModel", unet, slow=True),
    Case("vae", "diffusers AutoencoderKL", vae, slow=True),
    Case("lstm-lm", "torch nn.LSTM, pytorch/examples word LM (time-first, (h, c))", lstm),
    Case("transformer-lm", "torch nn.TransformerEncoder, time-first, causal mask", transformer_lm),
    Case("nanogpt", "nanoGPT-style GPT(GPTConfig()), own loss (reproduction)", nanogpt),
    Case("mingpt", "minGPT-style mlpf lambda and mask buffer (reproduction)", mingpt),
    Case("zero-init-resnet", "timm-style zero_init_last blocks (reproduction)", zero_init_resnet),
]


# -- planted bugs: the user's own mistakes, on top of the real models ------------------


def _detach_output(module: nn.Module) -> None:
    module.register_forward_hook(lambda m, args, out: out.detach())


def _frozen(module: nn.Module) -> None:
    module.requires_grad_(False)


def _dropout_in_eval(module: nn.Module) -> None:
    module.register_forward_hook(lambda m, args, out: F.dropout(out, 0.1))  # no training=


def _cpu_tensor(module: nn.Module) -> None:
    module.register_forward_hook(lambda m, args, out: out + torch.zeros(out.shape[-1]))


def _probabilities(module: nn.Module) -> None:
    module.register_forward_hook(lambda m, args, out: out.softmax(-1))


def _log(module: nn.Module) -> None:
    module.register_forward_hook(lambda m, args, out: torch.log(out))


def _numpy_noise(module: nn.Module) -> None:
    def hook(m: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        if not m.training:
            return out
        noise = np.random.normal(0, 0.1, tuple(out.shape)).astype("float32")
        return out + torch.from_numpy(noise)

    module.register_forward_hook(hook)


def _branch_on_values(module: nn.Module) -> None:
    module.register_forward_hook(lambda m, args, out: out * 2 if out.mean() > 0 else out)


def _dead_relu(model: nn.Module) -> None:
    for layer in model.bert.encoder.layer:  # type: ignore[union-attr]
        nn.init.constant_(layer.intermediate.dense.bias, -20.0)


def _unregistered_adapters(model: nn.Module) -> None:
    # LoRA-style adapters kept in a plain list: .to(), state_dict and the optimizer miss them
    model.adapters = [nn.Linear(32, 32) for _ in model.model.layers]  # type: ignore[union-attr]
    for layer, adapter in zip(model.model.layers, model.adapters, strict=True):  # type: ignore[union-attr, arg-type]
        layer.mlp.register_forward_hook(lambda m, args, out, a=adapter: out + a(out))


def _batch_stats_in_eval(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.track_running_stats = False
            module.running_mean = module.running_var = None


def _distance_head(module: nn.Module) -> None:
    # prototype logits as -|e - p|^2, expanded as |e|^2 + |p|^2 - 2 e.p: in bf16 the
    # large, nearly equal terms cancel
    module.protos = nn.Parameter(torch.randn(10, module.in_features) * 0.1 + 3.0)

    def hook(m: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        e = F.relu(args[0]) + 3.0  # (B, D)
        d2 = (e**2).sum(-1, keepdim=True) + (m.protos**2).sum(-1) - 2 * e @ m.protos.T
        return -d2  # (B, 10)

    module.register_forward_hook(hook)


def _sqrt_scale(module: nn.Module) -> None:
    module.scale = nn.Parameter(torch.zeros(4))
    module.register_forward_hook(lambda m, args, out: out * (1 + torch.sqrt((m.scale**2).sum())))


PLANTED: list[Case] = [
    Case("bert-lm-not-decoder", "transformers BertLMHeadModel",
         hf("hf:BertLMHeadModel", ENCODER_SIZE, TEXT, **CAUSAL),
         "causal-leak", "BertLMHeadModel as a language model with is_decoder left False"),
    Case("nanogpt-no-causal", "nanoGPT-style GPT (reproduction)",
         local(lambda: GPT(GPTConfig(), causal=False), tokens(B, T), **CAUSAL),
         "causal-leak", "attention with is_causal=False"),
    Case("transformer-lm-no-mask", "torch nn.TransformerEncoder",
         local(lambda: TransformerLM(causal=False), tokens(T, B, high=50), causal_dim=0,
               batch_dim=1),
         "causal-leak", "a time-first language model without its causal mask"),
    Case("lstm-flatten", "torch nn.LSTM (pytorch/examples word LM)",
         local(FlattenedRNN, *lstm_inputs, batch_dim=1),
         "batch-independence", "time-first (T, B, C) output flattened as if batch-first"),
    Case("resnet-batch-stats-in-eval", "transformers ResNetForImageClassification",
         planted(resnet, _batch_stats_in_eval),
         "batch-independence", "BatchNorm with track_running_stats=False"),
    Case("gpt2-detached-block", "transformers GPT2LMHeadModel",
         planted(gpt2, lambda m: _detach_output(m.transformer.h[0].mlp)),
         "grad-flow", "a block's output detached in the user's wrapper"),
    Case("llama-frozen-layer", "transformers LlamaForCausalLM",
         planted(llama, lambda m: _frozen(m.model.layers[0])),
         "param-update", "a layer left frozen after a warm-up"),
    Case("vit-dropout-in-eval", "transformers ViTForImageClassification",
         planted(vit, lambda m: _dropout_in_eval(m.vit.layers[0].mlp)),
         "eval-determinism", "F.dropout without training= in a wrapper"),
    Case("distilbert-keep-prob", "transformers DistilBertForSequenceClassification",
         hf("hf:DistilBertForSequenceClassification",
            {"n_layers": 2, "dim": 32, "hidden_dim": 64, "n_heads": 2, "vocab_size": V,
             "dropout": 0.9}, TEXT),
         "train-eval-gap", "dropout=0.9 meant as TensorFlow's keep_prob"),
    Case("vit-exploding-init", "transformers ViTForImageClassification",
         hf("hf:ViTForImageClassification",
            {**VISION_SIZE, "initializer_range": 1.0}, IMAGE),
         "init-loss", "initializer_range=1.0 instead of 0.02"),
    Case("convnext-softmax-head", "transformers ConvNextForImageClassification",
         planted(convnext, lambda m: _probabilities(m.classifier)),
         "init-loss", "softmax applied to the logits before the loss"),
    Case("qwen2-log-of-activations", "transformers Qwen2ForCausalLM",
         planted(qwen2, lambda m: _log(m.model.layers[0].mlp)),
         "nan-inf", "log of an activation that can be negative"),
    Case("gpt2-sqrt-at-zero", "transformers GPT2LMHeadModel",
         planted(gpt2, lambda m: _sqrt_scale(m.transformer.h[1].mlp)),
         "nan-inf", "sqrt of a zero-initialised norm (infinite derivative)"),
    Case("bert-dead-relu", "transformers BertForSequenceClassification",
         planted(hf("hf:BertForSequenceClassification",
                    {**ENCODER_SIZE, "num_labels": 3, "hidden_act": "relu"}, TEXT), _dead_relu),
         "dead-units", "a bias initialised at -20 before a ReLU"),
    Case("resnet-numpy-noise", "transformers ResNetForImageClassification",
         planted(resnet, lambda m: _numpy_noise(m.resnet.embedder)),
         "determinism", "np.random noise added in forward"),
    Case("opt-cpu-tensor", "transformers OPTForCausalLM",
         planted(opt, lambda m: _cpu_tensor(m.lm_head)),
         "device-consistency", "torch.zeros(n) without device= in a wrapper"),
    Case("llama-plain-list-adapters", "transformers LlamaForCausalLM",
         planted(llama, _unregistered_adapters),
         "device-consistency", "adapters kept in a Python list, not nn.ModuleList"),
    Case("t5-branch-on-values", "transformers T5ForConditionalGeneration",
         planted(t5, lambda m: _branch_on_values(m.lm_head)),
         "exportable", "Python if on a tensor's value in forward", slow=True),
    Case("nanogpt-softmax-in-loss", "nanoGPT-style GPT (reproduction)",
         local(lambda: SoftmaxLossGPT(GPTConfig()), tokens(B, T), **CAUSAL),
         "overfit-batch", "softmax before cross_entropy inside the model's own loss"),
    Case("vit-distance-head", "transformers ViTForImageClassification",
         planted(vit, lambda m: _distance_head(m.classifier)),
         "amp-drift", "squared distances expanded as |a|^2 + |b|^2 - 2ab"),
    Case("zero-init-resnet-frozen-fc", "timm-style zero_init_last ResNet (reproduction)",
         planted(zero_init_resnet, lambda m: _frozen(m.fc)),
         "param-update", "the classifier frozen although zero-init gates are fine"),
]  # fmt: skip


def build(case: Case) -> Built:
    torch.manual_seed(0)
    return case.build()
