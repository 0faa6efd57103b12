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


MARKED = """
from pathlib import Path

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        Path(__file__).with_name("built").write_text("the model was built")
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x)
"""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--knobs", "bogus"], "--knobs: unknown knob(s) 'bogus'"),
        (["--skip", "channels-last,nope"], "--skip: unknown knob(s) 'nope'"),
        (["--knobs", "threads-0"], "unknown knob(s) 'threads-0'"),
        (["--compile", "--compile-backend", "bogus"], "'bogus' is not a torch.compile backend"),
        (["--compile-backend", "bogus"], "'bogus' is not a torch.compile backend"),
        (["--lr-range", "10", "1e-7", "--find-lr"], "needs 0 < MIN < MAX"),
        (["--lr-range", "1e-3", "1e-3"], "needs 0 < MIN < MAX"),
        (["-o", "."], "is a directory"),
        (["-o", "no/such/dir/report.txt"], "does not exist"),
        (["--train-script", "missing_train.py"], "cannot read missing_train.py"),
    ],
)
def test_every_option_is_checked_before_the_model_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "marked.py").write_text(MARKED)
    code, _stdout, stderr = run("marked.py:Net", "-i", "f32[8,16]", "--budget", "1", *extra)
    assert code == 2, stderr
    assert message in stderr and stderr.count("\n") <= 2, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert not (tmp_path / "built").exists()  # nothing was built, let alone measured


def test_a_train_script_without_a_loop_is_refused(tmp_path: Path, model_file: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint('no loop here')\n")
    code, _, stderr = run(
        f"{model_file}:Net", "-i", "f32[8,16]", *QUICK, "--train-script", str(script)
    )
    assert code == 2 and "no training loop" in stderr


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
