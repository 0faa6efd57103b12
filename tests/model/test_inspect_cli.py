"""`torchwise inspect` end to end: formats, the documented JSON schema, scaling, errors."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from torchwise.cli import app
from torchwise.model.scaling import fit_exponent, parse_scaling

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["inspect", *args])
    return result.exit_code, result.output


def documented_schema() -> dict[str, object]:
    text = (REPO / "docs" / "inspect.md").read_text()
    block = re.search(r"```json\n(\{\n  \"\$schema\".*?)\n```", text, re.S)
    assert block is not None, "docs/inspect.md lost its JSON schema"
    schema: dict[str, object] = json.loads(block.group(1))
    return schema


def test_json_output_matches_the_documented_schema() -> None:
    code, out = run("zoo:gpt2", "--input", "i64[batch=1,seq=16]<50257", "--format", "json")
    assert code == 0
    data = json.loads(out)
    jsonschema.validate(data, documented_schema())
    assert data["total_params"] == 124_439_808
    assert data["shared_params"] == [["wte.weight", "lm_head.weight"]]


def test_text_output_has_table_and_totals() -> None:
    code, out = run("zoo:resnet18", "--depth", "1")
    assert code == 0
    assert "layer4 (Sequential)" in out and "[1,512,7,7]" in out
    assert "11,689,512" in out and "1.81 GMACs" in out  # torchvision: 1.81 GFLOPS (MACs)
    assert "Unsupported ops" in out and "Training memory" in out


def test_markdown_and_csv() -> None:
    code, md = run("zoo:llama-tiny", "--format", "markdown", "--depth", "1")
    assert code == 0 and md.startswith("## zoo:llama-tiny") and "|---|" in md
    code, text = run("zoo:llama-tiny", "--format", "csv", "--depth", "1")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert code == 0 and rows[0]["name"] == "" and rows[0]["params_total"] == "123712"
    assert {r["name"] for r in rows} >= {"tok_embeddings", "layers", "norm", "output"}


def test_example_project_from_its_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO / "examples" / "cifar_project")
    code, out = run("cifarnet", "--depth", "0", "--no-training")
    assert code == 0 and "[8,3,32,32]" in out and "[8,10]" in out


PAIRWISE = """
import torch
from torch import nn


class Pairwise(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ x.t()  # (T, d) @ (d, T) -> (T, T)
"""


def test_scaling_measures_a_quadratic(tmp_path: Path) -> None:
    # Pairwise scores x @ x^T: T*T*d MACs and a (T, T) output, so both grow as T^2.
    module = tmp_path / "pairwise.py"
    module.write_text(PAIRWISE)
    code, out = run(
        f"{module}:Pairwise", "--input", "f32[seq=64,32]", "--scaling", "seq=64,128,256",
        "--format", "json",
    )  # fmt: skip
    assert code == 0, out
    data = json.loads(out)
    assert [p["size"] for p in data["points"]] == [64, 128, 256]
    assert [p["macs"] for p in data["points"]] == [t * t * 32 for t in (64, 128, 256)]
    assert data["flops_exponent"] == pytest.approx(2.0)
    assert data["activation_exponent"] == pytest.approx(2.0, abs=0.05)


def test_memory_for_picks_the_attention_kernels_the_estimate_models() -> None:
    spec = ("zoo:gpt2", "--input", "i64[batch=1,seq=64]<50257", "--mode", "train")
    code, out = run(*spec, "--format", "json")
    assert code == 0, out
    cuda = json.loads(out)
    assert cuda["memory_for"] == "cuda" and cuda["attention_kernels"] == {"memory-efficient": 12}
    code, out = run(*spec, "--memory-for", "cpu")  # dropout in training: the CPU's math path
    assert code == 0 and "Attention kernels" in out and "math x12" in out
    code, out = run(*spec, "--memory-for", "tpu")
    assert code == 2 and "tpu" in out


def test_scaling_text_reports_exponents() -> None:
    code, out = run("zoo:llama-tiny", "--scaling", "seq=16,32,64")
    assert code == 0 and "FLOPs ~ seq^" in out and "activations ~ seq^" in out


def test_fit_exponent_and_parse() -> None:
    assert fit_exponent([1, 2, 4], [3, 12, 48]) == pytest.approx(2.0)
    assert fit_exponent([1, 2], [0, 5]) is None
    assert parse_scaling("seq=512,128,256") == ("seq", [128, 256, 512])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["zoo:gpt2", "--scaling", "seq=128"], "at least two positive sizes"),
        (["zoo:gpt2", "--scaling", "tokens=8,16"], "no input has a dimension named tokens"),
        (["zoo:nope"], "no zoo model 'nope'"),
        (["zoo:resnet18", "--input", "f32[1,3,224"], "bad input spec"),
        (
            ["zoo:resnet18", "--input", "f32[1,4,224,224]"],
            "forward of ResNet raised in conv1 (Conv2d)",
        ),
    ],
)
def test_errors_exit_2_with_one_clear_line(args: list[str], message: str) -> None:
    code, out = run(*args)
    assert code == 2 and message in out and "Traceback" not in out


def test_scaling_api_takes_a_target_string() -> None:
    # The documented call: scaling("zoo:llama-tiny", "seq", [...]) (it used to raise
    # AttributeError: a str has no input_specs).
    from torchwise.model.scaling import scaling

    result = scaling("zoo:llama-tiny", "seq", [16, 32])
    assert [p.size for p in result.points] == [16, 32]
    assert result.flops_exponent is not None and 1.0 <= result.flops_exponent < 1.2
