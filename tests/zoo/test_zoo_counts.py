"""Every zoo model has exactly its published parameter count, built on meta."""

from __future__ import annotations

import pytest
import torch

from torchwise import zoo

# Published figures: torchvision model cards (ResNet, MobileNetV2, ViT), HF model
# cards for GPT-2 / bert-base-uncased, and the Llama 2 paper's configurations.
PUBLISHED = {
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872,
    "vit_b_16": 86_567_656,
    # wte 50257*768 + wpe 1024*768 + 12 blocks * 7,087,872 + ln_f 1536; lm_head tied
    "gpt2": 124_439_808,
    # embeddings 23,837,184 + 12 layers * 7,087,872 + pooler 590,592
    "bert_base": 109_482_240,
    # embed 32000*4096 + 32 * (4*4096^2 + 3*4096*11008 + 2*4096) + 4096 + 32000*4096
    "llama-7b": 6_738_415_616,
    # 2*32000*8192 + 80 * (2*8192^2 + 2*8192*1024 + 3*8192*28672 + 2*8192) + 8192
    "llama-70b": 68_976_648_192,
    # embed 256*64 + 2 * (64*64*2 + 64*32*2 + 3*64*172 + 2*64) + 64 + 256*64
    "llama-tiny": 123_712,
}


def unique_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_count(name: str) -> None:
    entry = zoo.get(name)
    model = entry.build(device="meta")
    assert unique_count(model) == PUBLISHED[name] == entry.published_params
    assert all(p.device.type == "meta" for p in model.parameters())


def test_gpt2_lm_head_is_tied() -> None:
    model = zoo.get("gpt2").build(device="meta")
    assert model.lm_head.weight is model.wte.weight


def test_llama_is_configurable() -> None:
    model = zoo.get("llama").build(device="meta", dim=128, n_layers=3, n_heads=8, n_kv_heads=4)
    assert len(model.layers) == 3 and model.layers[0].attention.wk.out_features == 64


def test_small_zoo_models_run_for_real() -> None:
    model = zoo.get("llama-tiny").build()
    tokens = torch.randint(0, 256, (2, 16))
    assert model(tokens).shape == (2, 16, 256)


def test_registry_names_match_entries() -> None:
    assert zoo.names() == list(zoo.ZOO)
    assert zoo.get("llama_7b") is zoo.get("llama-7b")
