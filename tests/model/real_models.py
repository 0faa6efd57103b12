"""Real third-party architectures with small configs, for the inspect/doc real-model suite.

Each case builds a model from its library's own code (transformers, diffusers; timm
when it imports) with a tiny config, plus example inputs. Nothing is downloaded.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Case:
    name: str
    library: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]


def _ids(
    batch: int = 2, seq: int = 16, vocab: int = 1000
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (torch.randint(0, vocab, (batch, seq)),), {}


def transformers_cases() -> list[Case]:
    import transformers as T

    T.logging.set_verbosity_error()
    small = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
             "num_attention_heads": 4, "vocab_size": 1000}  # fmt: skip
    decoder = {**small, "num_key_value_heads": 2}

    def hf(cls: Any, config: Any) -> Callable[[], torch.nn.Module]:
        return lambda: cls(config)

    ids = torch.randint(0, 1000, (2, 16))
    return [
        Case(
            "gpt2",
            "transformers",
            hf(
                T.GPT2LMHeadModel,
                T.GPT2Config(
                    n_layer=2,
                    n_embd=64,
                    n_head=4,
                    vocab_size=1000,
                    n_positions=64,
                    bos_token_id=0,
                    eos_token_id=0,
                ),
            ),
            _ids,
        ),
        Case("llama", "transformers", hf(T.LlamaForCausalLM, T.LlamaConfig(**decoder)), _ids),
        Case(
            "mixtral",
            "transformers",
            hf(T.MixtralForCausalLM, T.MixtralConfig(**decoder, num_local_experts=4)),
            _ids,
        ),
        Case("bert", "transformers", hf(T.BertModel, T.BertConfig(**small)), _ids),
        Case(
            "t5",
            "transformers",
            hf(
                T.T5ForConditionalGeneration,
                T.T5Config(
                    num_layers=2, d_model=64, d_ff=128, num_heads=4, d_kv=16, vocab_size=1000
                ),
            ),
            lambda: ((ids,), {"decoder_input_ids": ids}),
        ),
        Case(
            "vit",
            "transformers",
            hf(
                T.ViTModel,
                T.ViTConfig(
                    **{k: v for k, v in small.items() if k != "vocab_size"},
                    image_size=32,
                    patch_size=8,
                ),
            ),
            lambda: ((torch.randn(2, 3, 32, 32),), {}),
        ),
        Case(
            "wav2vec2",
            "transformers",
            hf(
                T.Wav2Vec2Model,
                T.Wav2Vec2Config(
                    **{k: v for k, v in small.items() if k != "vocab_size"},
                    conv_dim=(16, 16),
                    conv_stride=(5, 2),
                    conv_kernel=(10, 3),
                    num_feat_extract_layers=2,
                    num_conv_pos_embeddings=16,
                    num_conv_pos_embedding_groups=4,
                ),
            ),
            lambda: ((torch.randn(2, 4000),), {}),
        ),
        Case(
            "whisper",
            "transformers",
            hf(
                T.WhisperModel,
                T.WhisperConfig(
                    encoder_layers=2,
                    decoder_layers=2,
                    d_model=64,
                    encoder_attention_heads=4,
                    decoder_attention_heads=4,
                    encoder_ffn_dim=128,
                    decoder_ffn_dim=128,
                    vocab_size=1000,
                    num_mel_bins=16,
                    max_source_positions=50,
                    pad_token_id=0,
                    bos_token_id=1,
                    eos_token_id=2,
                    decoder_start_token_id=1,
                ),
            ),
            lambda: ((torch.randn(2, 16, 100),), {"decoder_input_ids": ids[:, :4]}),
        ),
        Case(
            "convnext",
            "transformers",
            hf(
                T.ConvNextModel, T.ConvNextConfig(depths=[1, 1, 1, 1], hidden_sizes=[8, 16, 32, 64])
            ),
            lambda: ((torch.randn(2, 3, 64, 64),), {}),
        ),
    ]


def diffusers_cases() -> list[Case]:
    import diffusers as D

    return [
        Case("unet2d", "diffusers", lambda: D.UNet2DModel(
            sample_size=16, in_channels=3, out_channels=3, block_out_channels=(32, 64),
            down_block_types=("DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D"), layers_per_block=1,
            norm_num_groups=8), lambda: ((torch.randn(2, 3, 8, 8), torch.tensor([10, 20])), {})),
        Case("unet2d-condition", "diffusers", lambda: D.UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, block_out_channels=(32, 64),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), layers_per_block=1,
            cross_attention_dim=32, norm_num_groups=8, attention_head_dim=8),
            lambda: ((torch.randn(2, 4, 8, 8), torch.tensor([10, 20]), torch.randn(2, 7, 32)), {})),
        Case("autoencoder-kl", "diffusers", lambda: D.AutoencoderKL(
            block_out_channels=(32, 64), down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4, norm_num_groups=8),
            lambda: ((torch.randn(2, 3, 16, 16),), {})),
    ]  # fmt: skip


class _StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty ``torchvision`` modules, so that timm's model code imports without it.

    PyPI's torchvision is a CUDA build that does not load next to the CPU torch, and
    timm imports it at module level (transforms, datasets, one norm layer) though its
    models do not use it. Any attribute is a class that refuses to be instantiated.
    """

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _Placeholders(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _Missing(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Missing(name, (), {})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"torchvision stand-in: {cls.__name__} is not available")


class _Placeholders(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _Missing(name, (), {})
        setattr(self, name, value)
        return value


def import_timm() -> Any:
    """timm, with :class:`_StandIn` for torchvision when the real one does not import;
    None when timm is not installed."""
    try:
        return importlib.import_module("timm")
    except ModuleNotFoundError as exc:
        if exc.name == "timm":
            return None
    except Exception:
        pass
    for name in [n for n in sys.modules if n.split(".")[0] in ("torchvision", "timm")]:
        del sys.modules[name]
    finder = _StandIn()
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module("timm")
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.split(".")[0] == "torchvision"]:
            del sys.modules[name]


def timm_cases() -> list[Case]:
    timm = import_timm()
    if timm is None:
        return []

    def image(size: int) -> Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]:
        return lambda: ((torch.randn(1, 3, size, size),), {})

    # ViT's position embeddings fix its size; the convolutional nets take any (64: fast)
    sizes = {"resnet18": 64, "vit_tiny_patch16_224": 224, "mobilenetv3_small_100": 64,
             "convnext_atto": 64}  # fmt: skip
    return [
        Case(name, "timm", lambda name=name: timm.create_model(name), image(size))
        for name, size in sizes.items()
    ]
