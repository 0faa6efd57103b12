"""The doctor command: one seed for everything, bad input refused up front in one line,
structured inputs, and the batch every front end feeds doctor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from torchwise.cli import app
from torchwise.doctor import doctor_batch
from torchwise.target import resolve_target

MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)   # unseeded init: the CLI's --seed must cover it
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Graph(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, adj):
        return self.fc(adj @ x)


def graph():
    adj = torch.eye(5) + torch.diag(torch.ones(4), 1)
    return torch.randn(5, 4), adj / adj.sum(1, keepdim=True)
"""


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def doctor(*words: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["doctor", *words])
    return result.exit_code, result.output


def test_one_seed_covers_the_build(src: Path) -> None:
    words = [f"{src}:Net", "-i", "f32[4,6]", "--checks", "init-loss", "--format", "json"]
    runs = [json.loads(doctor(*words, "--seed", seed)[1]) for seed in ("0", "0", "7")]
    loss = [r["checks"][0]["evidence"]["expected_loss_random_labels"] for r in runs]
    assert loss[0] == loss[1] != loss[2]


def test_bad_input_is_refused_before_any_check(src: Path) -> None:
    code, out = doctor(f"{src}:Net", "-i", "f32[4,6]", "--target-spec", "i64[8]<3")
    assert code == 2 and "its batch (8) differs" in out and "FAIL" not in out
    code, out = doctor(f"{src}:Net", "-i", "f32[4,6]", "--causal", "3")
    assert code == 2 and "--causal 3 is beyond" in out
    code, out = doctor(f"{src}:Net", "-i", "f32[4,6]", "--batch-dim", "two")
    assert code == 2 and "not a dim index or 'none'" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without CUDA")
@pytest.mark.parametrize("command", ["doctor", "inspect"])
def test_device_cuda_without_cuda_is_one_line(src: Path, command: str) -> None:
    result = CliRunner().invoke(app, [command, f"{src}:Net", "-i", "f32[4,6]", "--device", "cuda"])
    assert result.exit_code == 2
    assert result.output.startswith("error: --device cuda: CUDA is not available here")
    assert "internal error" not in result.output


def test_a_graph_from_an_input_function(src: Path) -> None:
    code, out = doctor(f"{src}:Graph", "--inputs-from", f"{src}:graph", "--batch-dim", "none",
                       "--checks", "batch-independence,grad-flow", "--format", "json")  # fmt: skip
    report = json.loads(out)
    assert code == 0
    assert {c["id"]: c["status"] for c in report["checks"]} == {
        "grad-flow": "pass", "batch-independence": "skip"}  # fmt: skip
    assert report["inputs"] == ["f32[5,4]", "f32[5,5]"]


def test_every_front_end_gets_the_same_batch(src: Path) -> None:
    default = resolve_target(f"{src}:Net", inputs=["f32[batch=1,6]"])
    args, _ = doctor_batch(default, inputs_given=False)
    assert args[0].shape == (4, 6)  # a default single sample grows to a batch of 4
    given = resolve_target(f"{src}:Net", inputs=["f32[batch=2,6]"])
    args, _ = doctor_batch(given, inputs_given=True)
    assert args[0].shape == (2, 6)  # what the user asked for stands


def test_inspect_and_doc_take_the_same_input_function(src: Path) -> None:
    words = [f"{src}:Graph", "--inputs-from", f"{src}:graph", "--batch-dim", "none"]
    inspected = CliRunner().invoke(app, ["inspect", *words])
    assert inspected.exit_code == 0, inspected.output
    documented = CliRunner().invoke(app, ["doc", *words])
    assert documented.exit_code == 0, documented.output
    refused = CliRunner().invoke(app, ["tests", *words, "-o", "t.py"])
    assert refused.exit_code == 2 and "--inputs-from is not supported by tests" in refused.output
