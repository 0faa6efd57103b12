"""`torchwise tune` from the command line: formats, output files, errors as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from torchwise.cli import app

MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
"""
QUICK = ["--budget", "1", "--knobs", "zero-grad-in-place", "--no-profile", "--color", "never"]


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "net.py"
    path.write_text(MODEL)
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["tune", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_to_a_file(model_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code, stdout, stderr = run(
        f"{model_file}:Net", "-i", "f32[8,16]", *QUICK, "--format", "json", "-o", str(out)
    )
    assert code == 0, stderr
    assert stdout == ""
    data = json.loads(out.read_text())
    assert data["model"] == "Net" and [t["knob"] for t in data["trials"]] == ["zero-grad-in-place"]
    assert "stage 1" in stderr  # progress notes go to stderr


def test_text_report_and_quiet(model_file: Path) -> None:
    code, stdout, stderr = run(f"{model_file}:Net", "-i", "f32[8,16]", *QUICK, "-q")
    assert code == 0
    assert stdout.startswith("torchwise tune: Net on cpu")
    assert stderr == ""


def test_html_report(model_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "tune.html"
    code, _, stderr = run(
        f"{model_file}:Net", "-i", "f32[8,16]", *QUICK, "--format", "html", "-o", str(out)
    )
    assert code == 0, stderr
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_list_knobs_needs_no_target() -> None:
    code, stdout, _ = run("--list-knobs")
    assert code == 0
    assert "channels-last" in stdout and "cuda-graphs" in stdout and "threads-N" in stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--optimizer", "adamz"], "unknown optimizer 'adamz'"),
        (["--optimizer", "sgd:lr"], "expected key=value"),
        (["--optimizer", "lbfgs"], "LBFGS needs a closure"),
        (["--loader", "missing.py:make"], "file not found"),
        (["--memory-budget", "lots", "--find-batch-size"], "not a size"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(model_file: Path, extra: list[str], message: str) -> None:
    code, _stdout, stderr = run(f"{model_file}:Net", "-i", "f32[8,16]", *QUICK, *extra)
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr and "internal error" not in stderr


def test_cuda_on_a_cpu_machine(model_file: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, stderr = run(f"{model_file}:Net", "-i", "f32[8,16]", *QUICK, "--device", "cuda")
    assert code == 2
    assert "CUDA is not available on this machine" in stderr


def test_memory_budget_units() -> None:
    from torchwise.commands.tune import _parse_size

    assert _parse_size("8G") == 8 * 2**30
    assert _parse_size("512MiB") == 512 * 2**20
    assert _parse_size("1.5g") == int(1.5 * 2**30)
    assert _parse_size("1000") == 1000
    assert _parse_size(None) is None
