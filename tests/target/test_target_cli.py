"""The target options on the command line: --build, --batch-dim, tuple inputs, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from torchwise.cli import app

GPT = """
from dataclasses import dataclass

from torch import nn


@dataclass
class GPTConfig:
    vocab_size: int = 64
    n_embd: int = 16


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        print("building GPT")
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size)

    def forward(self, idx):
        return self.head(self.wte(idx))
"""


def test_inspect_with_a_build_expression_keeps_stdout_clean(tmp_path: Path) -> None:
    (tmp_path / "gpt.py").write_text(GPT)
    result = CliRunner().invoke(
        app,
        ["inspect", str(tmp_path / "gpt.py"), "--build", "GPT(GPTConfig(n_embd=8))",
         "--input", "i64[2,4]<64", "--format", "json", "--no-training"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # the constructor's print went to stderr
    assert report["param_bytes"] == (64 * 8 + 8 * 64 + 64) * 4  # embedding + head, float32


def test_script_that_needs_arguments_is_one_line_and_exit_2(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--lr', type=float, required=True)\nparser.parse_args()\n"
    )
    result = CliRunner().invoke(app, ["inspect", f"{script}:Net", "--input", "f32[1,2]"])
    assert result.exit_code == 2
    assert "exited with status 2 at" in result.output and "train.py:4" in result.output
    assert "Traceback" not in result.output and "usage:" not in result.output


def test_doctor_help_lists_the_target_options() -> None:
    result = CliRunner().invoke(app, ["doctor", "--help"])
    for option in ("--build", "--build-on", "--batch-dim", "hf:NAME"):
        assert option in result.output


def test_syntax_error_points_at_the_users_line_not_torchwise(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Net(torch.nn.Module)\n    pass\n")
    result = CliRunner().invoke(app, ["inspect", f"{bad}:Net", "--input", "f32[1,2]"])
    assert result.exit_code == 2
    assert f"{bad}:2" in result.output and "SyntaxError" in result.output
    assert "target" not in result.output.replace(str(tmp_path), "")  # no torchwise frame
