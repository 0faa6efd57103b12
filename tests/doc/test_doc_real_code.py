"""`torchwise doc` on the patterns of real code (minimal reproductions in fixtures/):
nanoGPT's config-built, printing GPT with a (logits, None) return, pytorch/examples'
time-first LSTM with a tuple hidden state; and the refusals and one-line errors."""

from __future__ import annotations

import doctest
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchwise.cli import app

FIXTURES = Path(__file__).parent / "fixtures"
GPT_BUILD = ("--build", "GPT(GPTConfig(n_layer=2))", "--input", "i64[2,16]<96")
LSTM_TARGET = ("word_lm_style.py:RNNModel", "--input", "i64[7,4]<50, (f32[2,4,16], f32[2,4,16])")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("nanogpt_style.py", "word_lm_style.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


def run(*args: str) -> tuple[int, str, str]:
    # Each CLI call is a fresh process for a user: forget modules imported from tmp files.
    for name in list(sys.modules):
        if "_torchwise_target_" in name or name in ("nanogpt_style", "word_lm_style"):
            del sys.modules[name]
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def import_file(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(f"check_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nanogpt_style_gpt_is_documented_from_its_build_expression(project: Path) -> None:
    code, _, err = run("doc", "nanogpt_style.py", *GPT_BUILD, "--write")
    assert code == 0, err
    text = (project / "nanogpt_style.py").read_text()
    # The Example uses the configured build and expects what the constructor prints.
    assert ">>> model = GPT(GPTConfig(n_layer=2)).eval()\n        number of parameters:" in text
    assert "        config (GPTConfig)\n" in text  # typed from the value the build passed
    # Returns: the None member, and what `targets` changes (the loss and the logits' length)
    assert (
        "tuple[Tensor[float32, (batch, 1, 96)] (Tensor[float32, (batch, seq_len, 96)] with "
        "targets), None (Tensor[float32, ()] with targets)]" in text
    )
    assert "targets (Tensor[int64, (batch, seq_len)], default=None)" in text
    # dropout is 0: the `dropout_p=... if self.training else 0` branch changes nothing
    assert "Train and eval:" not in text
    results = doctest.testmod(import_file(project / "nanogpt_style.py"), verbose=False)  # type: ignore[arg-type]
    assert results.attempted >= 5 and results.failed == 0
    assert run("doc", "nanogpt_style.py", *GPT_BUILD, "--check")[0] == 0


def test_check_hint_repeats_every_option(project: Path) -> None:
    code, _, err = run("doc", "nanogpt_style.py", *GPT_BUILD, "--check")
    assert code == 1
    assert (
        "run `torchwise doc nanogpt_style.py --input 'i64[2,16]<96' "
        "--build 'GPT(GPTConfig(n_layer=2))' --write`" in err
    )


def test_dropout_in_train_mode_is_said_with_its_rate(project: Path) -> None:
    build = ("--build", "GPT(GPTConfig(n_layer=2, dropout=0.1))", "--input", "i64[2,16]<96")
    code, out, _ = run("doc", "nanogpt_style.py", *build)
    assert code == 0
    assert "CausalSelfAttention (``transformer.h.0.attn``, ``transformer.h.1.attn``):" in out
    assert "``dropout_p=0.1`` in train, ``dropout_p=0`` in eval." in out


def test_time_first_lstm_with_a_tuple_hidden_state(project: Path) -> None:
    code, out, err = run("doc", *LSTM_TARGET, "--batch-dim", "1")
    assert code == 0, err
    assert "- input: ``(seq_len, batch)``, int64" in out
    assert "- hidden[0]: ``(2, batch, 16)``, float32" in out
    assert "- Output ``out[0]``: ``(seq_len*batch, 50)``, float32" in out
    assert "hidden (tuple[Tensor[float32, (2, batch, 16)], Tensor[float32, (2, batch, 16)]])" in out
    assert ">>> hidden = (torch.randn(2, 4, 16), torch.randn(2, 4, 16))" in out
    assert "dropout with p=0.2 between stacked layers" in " ".join(out.split())


def test_write_refuses_installed_packages(project: Path) -> None:
    package = project / "venv" / "lib" / "site-packages" / "thirdparty"
    package.mkdir(parents=True)
    installed = package / "model.py"
    shutil.copy(FIXTURES / "word_lm_style.py", installed)
    before = installed.read_bytes()
    code, _, err = run("doc", f"{installed}:RNNModel", *LSTM_TARGET[1:], "--write")
    assert code == 2
    assert err.startswith("error: refusing to edit ") and "inside site-packages" in err
    assert len(err.strip().splitlines()) == 2  # the error and its hint
    assert installed.read_bytes() == before


@pytest.mark.parametrize("where", ["directory", "/proc/torchwise-page.md"])
def test_markdown_to_a_directory_or_unwritable_path_is_one_line(project: Path, where: str) -> None:
    target = str(project) if where == "directory" else where
    code, _, err = run("doc", *LSTM_TARGET, "--markdown", target)
    assert code == 2
    assert err.startswith(f"error: cannot write {target}")
    assert "Traceback" not in err and "internal error" not in err


BROKEN = """
import torch
from torch import nn


class Inner(nn.Module):
    def forward(self, x):
        return x.view(3, -1, 7)  # the bug


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.inner = Inner()

    def forward(self, x):
        return self.inner(self.fc(x))
"""


def test_a_forward_that_raises_gives_the_same_message_in_inspect_and_doc(project: Path) -> None:
    (project / "broken.py").write_text(BROKEN)
    messages = []
    for command in ("inspect", "doc"):
        code, out, err = run(command, "broken.py:Broken", "--input", "f32[2,4]")
        assert code == 2 and out == ""
        messages.append(err)
    assert messages[0] == messages[1]
    first = messages[0].splitlines()[0]
    assert first.startswith("error: forward of Broken raised in inner (Inner) at broken.py:8: ")
    assert len(messages[0].strip().splitlines()) == 2


def test_a_wrong_input_shape_is_one_line_not_torch_logs(project: Path) -> None:
    for command in ("inspect", "doc"):
        code, _, err = run(command, *LSTM_TARGET[:2], "i64[7,4]<50, (f32[3,4,16], f32[2,4,16])")
        assert code == 2, command
        lines = err.strip().splitlines()
        assert len(lines) == 2, err  # error + hint, no FakeTensor traceback log
        assert lines[0].startswith("error: forward of RNNModel raised in rnn (LSTM)")


def test_shape_experiments_report_progress(project: Path) -> None:
    import contextlib
    from collections.abc import Iterator

    from torchwise.doc import run_doc
    from torchwise.target import TargetRequest

    class Recorder:
        """Stands in for torchwise.console.Console: what a progress bar would be told."""

        def __init__(self) -> None:
            self.bars: list[tuple[int | None, str]] = []
            self.steps = 0

        @contextlib.contextmanager
        def progress(self, total: int | None, description: str) -> Iterator[Recorder]:
            self.bars.append((total, description))
            yield self

        def advance(self, steps: int = 1, *, label: str | None = None) -> None:
            self.steps += steps

    console = Recorder()
    request = TargetRequest(LSTM_TARGET[0], (LSTM_TARGET[2],), batch_dim=1)
    code, out, _ = run_doc(request, console=console)  # type: ignore[arg-type]
    assert code == 0 and "shape experiments" not in out
    assert [d for _, d in console.bars] == ["doc: shape experiments"]
    total = console.bars[0][0]
    assert total is not None and console.steps >= 5  # one step per forward run
