"""hf: and timm: targets: library classes built from their configs, no hub access."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchwise.errors import TorchwiseError
from torchwise.target import resolve_target

TINY_LLAMA = (
    '{"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, '
    '"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}'
)


@pytest.fixture(scope="module")
def transformers() -> object:
    return pytest.importorskip("transformers")


def test_hf_causal_lm_from_its_config_class(transformers: object) -> None:
    t = resolve_target("hf:LlamaForCausalLM", init_kwargs=TINY_LLAMA)
    # embed 256*64 + 2 layers x (q 64*64 + k,v 2*64*32 + o 64*64 + mlp 3*64*128 + 2 norms 64)
    # + final norm 64 + untied lm_head 256*64 = 16,384 + 2*36,992 + 64 + 16,384
    assert sum(p.numel() for p in t.model.parameters()) == 106_816
    assert t.origin == "hf" and t.module == "transformers"
    assert t.build_names == ("LlamaForCausalLM", "LlamaConfig")
    assert t.build == (
        "LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,"
        " num_attention_heads=4, num_key_value_heads=2, vocab_size=256))"
    )
    assert [str(s) for s in t.input_specs] == ["input_ids=i64[batch=1,seq=32]<256"]
    assert t.model(**t.kwargs).logits.shape == (1, 32, 256)


def test_hf_7b_default_config_builds_on_meta_in_no_memory(transformers: object) -> None:
    t = resolve_target("hf:LlamaForCausalLM", device="meta")
    assert sum(p.numel() for p in t.model.parameters()) == 6_738_415_616  # Llama-2-7B
    assert t.built_on == "meta" and "built on meta" in t.notes[0]


def test_hf_7b_is_refused_by_a_command_that_runs_it(transformers: object) -> None:
    with pytest.raises(TorchwiseError, match="6,738,415,616 parameters"):
        resolve_target("hf:LlamaForCausalLM", device="cpu")


def test_hf_config_typo_is_an_error_not_a_default_sized_model(transformers: object) -> None:
    with pytest.raises(TorchwiseError) as info:
        resolve_target("hf:LlamaForCausalLM", init_kwargs='{"num_hiden_layers": 2}', device="meta")
    assert "no field 'num_hiden_layers'" in str(info.value)
    assert info.value.hint is not None and "num_hidden_layers" in info.value.hint


def test_hf_accepts_keys_the_model_code_reads(transformers: object) -> None:
    # Qwen3-MoE reads getattr(config, "head_dim", ...) though its config does not declare it
    rt = resolve_target(
        "hf:Qwen3MoeForCausalLM",
        init_kwargs='{"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 4, '
        '"num_key_value_heads": 2, "head_dim": 16, "vocab_size": 64, "num_experts": 2, '
        '"num_experts_per_tok": 1, "moe_intermediate_size": 16, "intermediate_size": 32}',
        device="meta",
    )
    assert rt.model.config.head_dim == 16
    assert rt.model.model.layers[0].self_attn.q_proj.out_features == 4 * 16


def test_hf_attribute_map_names_are_config_fields(transformers: object) -> None:
    # GPT-2 calls its depth n_layer; num_hidden_layers maps onto it
    t = resolve_target(
        "hf:GPT2LMHeadModel",
        init_kwargs='{"num_hidden_layers": 1, "n_embd": 32, "n_head": 2, "vocab_size": 100, '
        '"n_positions": 64}',
    )
    assert len(t.model.transformer.h) == 1
    assert str(t.input_specs[0]) == "input_ids=i64[batch=1,seq=32]<100"


def test_hf_unknown_class_suggests_the_spelling(transformers: object) -> None:
    with pytest.raises(TorchwiseError) as info:
        resolve_target("hf:LlamaForCausalLm", device="meta")
    assert info.value.hint is not None and "LlamaForCausalLM" in info.value.hint


def test_hf_falls_back_to_diffusers_models() -> None:
    pytest.importorskip("diffusers")
    t = resolve_target(
        "hf:UNet2DModel",
        init_kwargs='{"sample_size": 16, "block_out_channels": [16, 32], "norm_num_groups": 8, '
        '"down_block_types": ["DownBlock2D", "AttnDownBlock2D"], "layers_per_block": 1, '
        '"up_block_types": ["AttnUpBlock2D", "UpBlock2D"]}',
        inputs=["f32[batch=2,3,16,16], i64[batch=2]<1000"],
    )
    assert t.module == "diffusers" and t.build is not None
    assert t.build.startswith("UNet2DModel(sample_size=16")
    assert t.model(*t.args).sample.shape == (2, 3, 16, 16)


def test_hf_target_in_config(tmp_path: Path, transformers: object) -> None:
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [tool.torchwise.models.llama]
            target = "hf:LlamaForCausalLM"
            init-kwargs = {TINY_LLAMA.replace('"', "").replace(":", " =")}
            """
        )
    )
    t = resolve_target("llama", config_start=tmp_path)
    assert t.config_name == "llama" and t.origin == "hf"
    assert sum(p.numel() for p in t.model.parameters()) == 106_816


# A stand-in for timm's three entry points, to test torchwise's side of timm:NAME on
# machines where timm cannot import (PyPI's torchvision is a CUDA build that does not
# load next to a CPU torch). The real library is tested below where it imports.
FAKE_TIMM = """
from torch import nn

_MODELS = {"tinynet_a": 10}


def is_model(name):
    return name in _MODELS


def list_models(pattern="*"):
    import fnmatch
    return [m for m in _MODELS if fnmatch.fnmatch(m, pattern)]


def create_model(name, pretrained=False, num_classes=None, **kwargs):
    assert pretrained is False
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, num_classes or _MODELS[name]))
    model.pretrained_cfg = {"input_size": (3, 32, 32)}
    return model
"""


@pytest.fixture()
def stand_in_timm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory first on sys.path for a ``timm`` package; sys.modules restored after."""
    saved = sys.modules.pop("timm", None)
    (tmp_path / "timm").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "timm" / "__init__.py"
    sys.modules.pop("timm", None)
    if saved is not None:
        sys.modules["timm"] = saved


def test_timm_target_calls_create_model_without_weights(stand_in_timm: Path) -> None:
    stand_in_timm.write_text(FAKE_TIMM)
    t = resolve_target("timm:tinynet_a", init_kwargs='{"num_classes": 3}')
    assert t.build == "create_model('tinynet_a', pretrained=False, num_classes=3)"
    assert (t.module, t.build_names, t.origin) == ("timm", ("create_model",), "timm")
    assert [str(s) for s in t.input_specs] == ["f32[batch=1,3,32,32]"]
    assert t.model(*t.args).shape == (1, 3)
    with pytest.raises(TorchwiseError) as info:
        resolve_target("timm:tinynet")
    assert info.value.hint is not None and "tinynet_a" in info.value.hint


def test_timm_that_cannot_import_says_why(stand_in_timm: Path) -> None:
    stand_in_timm.write_text("import torchvision_that_is_missing\n")
    with pytest.raises(TorchwiseError, match="timm is installed but cannot be imported"):
        resolve_target("timm:resnet18")


def test_real_timm_resnet50() -> None:
    try:
        import timm  # noqa: F401
    except Exception as exc:  # ImportError, or torchvision's operator registration failing
        pytest.skip(f"timm does not import here: {type(exc).__name__}: {exc}")
    t = resolve_target("timm:resnet50", device="meta")
    assert sum(p.numel() for p in t.model.parameters()) == 25_557_032


@pytest.mark.parametrize(
    ("target", "published"),
    [
        ("hf:GPT2LMHeadModel", 124_439_808),  # gpt2, lm_head tied to wte
        ("hf:BertModel", 109_482_240),  # bert-base-uncased, with pooler
        ("hf:DistilBertModel", 66_362_880),  # distilbert-base-uncased
        ("hf:T5ForConditionalGeneration", 60_506_624),  # t5-small
        ("hf:ViTModel", 86_389_248),  # vit-base-patch16-224-in21k
        ("hf:ResNetModel", 23_508_032),  # resnet-50 without its 1000-class head
        ("hf:LlamaForCausalLM", 6_738_415_616),  # Llama-2-7B
    ],
)
def test_default_configs_have_the_published_parameter_counts(
    transformers: object, target: str, published: int
) -> None:
    t = resolve_target(target, build_on="meta", device="meta")
    assert t.built_on == "meta"
    assert sum(p.numel() for p in t.model.parameters()) == published
