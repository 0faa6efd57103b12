"""The behaviour every command shares: one-line errors, exit codes, pipes, colour, output files."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from torchwise.cli import app
from torchwise.commands._common import output_options
from torchwise.console import Console, color_enabled, silence_torch_logs, write_output
from torchwise.errors import OutputError, UserCodeError

PYTHON = sys.executable


def torchwise(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a subprocess (pipes, exit codes, stderr)."""
    return subprocess.run(
        [PYTHON, "-m", "torchwise", *args], capture_output=True, text=True, check=False, **kwargs
    )  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect"], "error: missing argument 'TARGET'"),
        (["review", "--format", "xx"], "error: invalid value for '--format'"),
        (["review", "--bogus"], "error: no such option '--bogus'"),
        (["ckpt", "bogus"], "error: no such command 'bogus'"),
    ],
)
def test_usage_errors_are_one_error_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith(message), result.stderr
    # At most a hint follows; never click's Usage: block.
    assert all(line.startswith("hint: ") for line in lines[1:]), result.stderr
    assert "Usage:" not in result.stderr


def test_a_bare_group_prints_its_help_and_exits_2() -> None:
    result = CliRunner().invoke(app, ["ckpt"])
    assert result.exit_code == 2
    assert "Usage: " in result.stderr and "ckpt [OPTIONS] COMMAND" in result.stderr


def test_closed_pipe_exits_quietly() -> None:
    # `torchwise rules | head -1`: the reader has gone. Its end of the pipe is closed
    # before torchwise starts, so the first write fails whatever the scheduling (a
    # reader that leaves after one line races the writer: a short report can fit in
    # the pipe's buffer before the reader closes it).
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = subprocess.run(
            [PYTHON, "-m", "torchwise", "rules"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            check=False,
        )
    finally:
        os.close(write_end)
    assert process.returncode == 141
    assert process.stderr.decode() == ""


_NO_TORCH = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith(("torch.", "safetensors")):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTorch())
    from torchwise.cli import main
    main(sys.argv[1:])
    """
)


def without_torch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """torchwise in an interpreter where torch and safetensors cannot be imported."""
    return subprocess.run(
        [PYTHON, "-c", _NO_TORCH, *args], capture_output=True, text=True, cwd=cwd, check=False
    )


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "zoo:resnet18"],
        ["doctor", "model.py:Net"],
        ["doc", "model.py:Net"],
    ],
)
def test_model_commands_say_they_need_torch(command: list[str], tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("import torch\n")
    result = without_torch(*command, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    first, hint = result.stderr.splitlines()
    assert first == (
        f"error: torchwise {command[0]} needs PyTorch, which is not installed: "
        "pip install torch (or pip install 'torchwise[torch]')"
    )
    # what the default install costs, and the one that really is CPU-only
    assert hint.startswith("hint: on Linux, pip's default torch is the CUDA build"), hint
    assert hint.endswith("pip install torch --index-url https://download.pytorch.org/whl/cpu")


def test_light_commands_work_without_torch(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nx = torch.load('m.pt')\n")
    (tmp_path / "state.pkl").write_bytes(b"\x80\x02}q\x00.")  # an empty dict, protocol 2
    review = without_torch("review", "train.py", "--no-cache", cwd=tmp_path)
    assert review.returncode == 1, review.stderr
    assert "TW301" in review.stdout
    rules = without_torch("rules", "TW101", cwd=tmp_path)
    assert rules.returncode == 0, rules.stderr
    scan = without_torch("ckpt", "scan", "state.pkl", cwd=tmp_path)
    assert scan.returncode == 0, scan.stdout + scan.stderr


def test_the_base_install_does_not_depend_on_torch() -> None:
    import tomllib

    pyproject = Path(__file__).parents[1] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text())["project"]
    base = " ".join(project["dependencies"])
    assert "torch" not in base and "safetensors" not in base
    assert any(dep.startswith("torch>=") for dep in project["optional-dependencies"]["torch"])


@pytest.mark.parametrize(
    ("choice", "env", "tty", "expected"),
    [
        ("always", {"NO_COLOR": "1"}, False, True),
        ("never", {"FORCE_COLOR": "1"}, True, False),
        ("auto", {}, True, True),
        ("auto", {}, False, False),
        ("auto", {"NO_COLOR": "1"}, True, False),
        ("auto", {"NO_COLOR": ""}, True, True),  # no-color.org: only a non-empty value counts
        ("auto", {"FORCE_COLOR": "1"}, False, True),
        ("auto", {"FORCE_COLOR": "0"}, False, False),
    ],
)
def test_color_follows_the_flag_then_no_color_then_force_color_then_the_terminal(
    choice: str, env: dict[str, str], tty: bool, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    assert color_enabled(choice, Stream()) is expected


@click.command()
@output_options()
def _report(console: Console) -> None:
    console.note("working")
    console.emit(console.paint("FAIL", "fail") + " one check")


def test_output_options_write_the_report_and_honour_quiet(tmp_path: Path) -> None:
    runner = CliRunner()
    shown = runner.invoke(_report, ["--color", "always"])
    assert shown.exit_code == 0
    assert shown.stdout == "\x1b[1;31mFAIL\x1b[0m one check\n"
    assert shown.stderr == "working\n"
    quiet = runner.invoke(_report, ["-q", "--color", "never"])
    assert (quiet.stdout, quiet.stderr) == ("FAIL one check\n", "")
    target = tmp_path / "out" / "report.txt"
    written = runner.invoke(_report, ["-o", str(target)])
    assert written.stdout == ""
    assert target.read_text() == "FAIL one check\n"  # a file is never coloured under auto
    both = runner.invoke(_report, ["-q", "-v"])
    assert both.exit_code == 2


def test_an_output_path_that_is_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="it is a directory"):
        write_output(tmp_path, "x")
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(OutputError, match=r"cannot write .*file/report\.txt"):
        write_output(blocked / "report.txt", "x")


def test_torch_logs_are_silenced_for_the_block_only() -> None:
    import logging

    logger = logging.getLogger("torch._subclasses.fake_tensor")
    logger.setLevel(logging.WARNING)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        with silence_torch_logs():
            logger.error("fallback traceback")
        assert records == []
        logger.error("after")
        assert [r.getMessage() for r in records] == ["after"]
    finally:
        logger.removeHandler(handler)


def test_user_code_error_names_the_users_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "user_model.py").write_text(
        "def forward(x):\n    return x.view(3, 5)\n"  # line 2 raises
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import user_model  # type: ignore[import-not-found]

        with pytest.raises(ValueError) as caught:
            try:
                user_model.forward([1])
            except AttributeError as exc:
                raise ValueError("view failed") from exc
        error = UserCodeError.from_exception(
            caught.value.__cause__ or caught.value, doing="forward of Net", where="head (Linear)"
        )
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("user_model", None)
    assert error.location == "user_model.py:2"
    assert str(error).startswith("forward of Net raised in head (Linear) at user_model.py:2: ")
    assert "AttributeError" in str(error)


def test_user_code_error_points_a_syntax_error_at_the_users_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Net(:\n    pass\n")
    with pytest.raises(SyntaxError) as caught:
        compile(bad.read_text(), str(bad), "exec")
    error = UserCodeError.from_exception(caught.value, doing="importing bad.py")
    assert error.location is not None and error.location.endswith("bad.py:2")
    assert "SyntaxError" in str(error)


def test_interrupt_exits_130(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from torchwise import cli\n"
        "def boom(*a, **k):\n    raise KeyboardInterrupt\n"
        "cli._load_command = lambda name: __import__('click').command(name)(boom)\n"
        "cli.main(['review'])\n"
    )
    result = subprocess.run(
        [PYTHON, "-c", script], capture_output=True, text=True, check=False, env=os.environ
    )
    assert result.returncode == 130
    assert result.stderr.strip() == "interrupted"


def test_an_output_is_checked_before_the_work_and_leaves_nothing_behind(tmp_path: Path) -> None:
    from torchwise.console import check_writable

    check_writable(tmp_path / "new" / "deeper" / "report.txt")
    assert list(tmp_path.iterdir()) == []  # the probe file and its directories are gone
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match=r"cannot write .*file/out\.txt: Not a directory"):
        check_writable(tmp_path / "file" / "out.txt")
    with pytest.raises(OutputError, match="it is a directory"):
        check_writable(tmp_path)
    assert (tmp_path / "file").read_text() == "x"


_MISSING = Path("/nonexistent-dir/x.txt")


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda: _MISSING.write_text("x"), f"cannot write {_MISSING}: "),
        (lambda: _MISSING.read_text(), f"cannot read {_MISSING}: "),
    ],
)
def test_an_os_error_that_reaches_the_cli_is_cannot_read_or_write(
    call: object, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchwise.cli import _run_guarded

    with pytest.raises(SystemExit) as stopped:
        _run_guarded(call, "torchwise x")  # type: ignore[arg-type]
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {said}No such file or directory"), err
    assert "internal error" not in err


def test_every_float_option_refuses_nan_and_infinity() -> None:
    result = CliRunner().invoke(app, ["project", ".", "--model-timeout", "inf"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid value for '--model-timeout': inf is not")


def test_a_bug_in_torchwise_is_one_internal_error_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchwise.cli import _run_guarded

    def bug() -> None:
        raise ValueError("boom")

    monkeypatch.delenv("TORCHWISE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as stopped:
        _run_guarded(bug, "torchwise x")  # type: ignore[arg-type]
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("internal error: ValueError: boom\n"), err
    assert "TORCHWISE_DEBUG=1" in err and "Traceback" not in err
    # with TORCHWISE_DEBUG the traceback is the report
    monkeypatch.setenv("TORCHWISE_DEBUG", "1")
    with pytest.raises(SystemExit) as stopped:
        _run_guarded(bug, "torchwise x")  # type: ignore[arg-type]
    assert stopped.value.code == 2
    assert "Traceback" in capsys.readouterr().err
