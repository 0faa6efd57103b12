"""inspect and doc on real third-party architectures (tiny configs, no weights downloaded).

Parameter counts are checked against each library's own count (transformers' and
diffusers' ``num_parameters()``, timm's model cards), forward FLOPs against
``torch.utils.flop_counter.FlopCounterMode`` on a real CPU forward: its figure must
be one of torchwise's two conventions (peers skip the SDPA kernel on the CPU, so
it is usually the no-attention one), except where it misses work (MoE experts).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from real_models import Case, diffusers_cases, timm_cases, transformers_cases
from torch.utils.flop_counter import FlopCounterMode

from torchwise.cli import app
from torchwise.model import summarize

CASES = transformers_cases() + diffusers_cases() + timm_cases()
#: timm's model cards (its own published counts)
TIMM_PARAMS = {
    "resnet18": 11_689_512,
    "vit_tiny_patch16_224": 5_717_416,
    "mobilenetv3_small_100": 2_542_856,
    "convnext_atto": 3_695_520,
}
# Mixtral, 2 layers, 2 x 16 tokens: per token and layer the attention projections
# (64x64 q, 64x32 k and v, 64x64 o = 12,288 MACs), the router (64x4 = 256) and two
# of four experts (3 x 64x128 = 24,576 MACs each); then lm_head (64x1000) per token.
MIXTRAL_FLOPS = 2 * 32 * (2 * (12_288 + 256 + 2 * 24_576) + 64_000)
assert MIXTRAL_FLOPS == 11_993_088


def library_count(case: Case, model: torch.nn.Module) -> int:
    if case.library == "timm":
        return TIMM_PARAMS[case.name]
    count: int = model.num_parameters()  # type: ignore[operator]
    return count


def peer_flops(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(*args, **kwargs)
    return int(counter.get_total_flops())


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_exact_counts_and_flops_on_meta(case: Case) -> None:
    model = case.build().eval()
    args, kwargs = case.inputs()
    summary = summarize(model, args, kwargs, estimate_training=False)
    assert summary.total_params == library_count(case, model)
    assert summary.unsupported_ops == {}
    assert summary.device_used == "meta" and summary.notes == []  # no fallback needed
    no_attention = summary.flops_forward - summary.attention_flops_forward
    peer = peer_flops(model, args, kwargs)
    if case.name == "mixtral":
        # FlopCounterMode has no formula for _grouped_mm: it misses every expert.
        assert no_attention == MIXTRAL_FLOPS and peer == MIXTRAL_FLOPS - 2 * 32 * 2 * 49_152
    else:
        assert peer in (no_attention, summary.flops_forward)
    is_attention = any("attention" in type(m).__name__.lower() for m in model.modules())
    assert (summary.attention_flops_forward > 0) == is_attention


def test_inspect_cli_on_an_hf_target_in_both_conventions() -> None:
    config = '{"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, ' \
        '"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}'  # fmt: skip
    common = ["inspect", "hf:LlamaForCausalLM", "--init-kwargs", config, "--input",
              "i64[2,16]<1000", "--format", "json", "--no-training"]  # fmt: skip
    full = json.loads(CliRunner().invoke(app, common).stdout)
    peer = json.loads(
        CliRunner().invoke(app, [*common, "--flops-convention", "no-attention"]).stdout
    )
    assert full["total_params"] == 202_048
    assert full["flops_convention"] == "full" and peer["flops_convention"] == "no-attention"
    # QK^T and PV: 2 layers x 2 products x 2 FLOPs x (2 x 4 heads x 16 x 16 x 16 head dim)
    assert full["attention_flops_forward"] == 2 * 2 * 2 * (2 * 4 * 16 * 16 * 16) == 262_144
    assert peer["flops_forward"] == full["flops_forward"] - 262_144 == 8_814_592


def test_doc_on_an_installed_hf_model_prints_and_refuses_to_write() -> None:
    config = '{"num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64, ' \
        '"num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 100}'  # fmt: skip
    target = ["hf:LlamaForCausalLM", "--init-kwargs", config, "--input", "i64[2,8]<100"]
    result = CliRunner().invoke(app, ["doc", *target])
    assert result.exit_code == 0, result.stderr
    assert "        config (LlamaConfig)\n" in result.stdout
    assert ">>> model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, hidden_size=32," in (
        result.stdout
    )
    assert "- Output ``out['logits']``: ``(batch, seq_len, 100)``, float32" in result.stdout
    refused = CliRunner().invoke(app, ["doc", *target, "--write"])
    assert refused.exit_code == 2 and "inside site-packages" in refused.stderr
