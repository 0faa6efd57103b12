"""Each case a new user met (issue 10, "Why"), through the CLI: one clear line, the right exit.

Cases covered elsewhere, so they are not repeated here: a closed pipe and model commands
without torch (``test_cli_core.py``), a typo in ``[tool.torchwise]`` (``test_config.py``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import click
import pytest
import torch
from click.testing import CliRunner, Result

from torchwise.cli import COMMANDS, app

NET = textwrap.dedent(
    """
    import torch.nn as nn

    class Inner(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    class Net(nn.Module):
        def __init__(self, fail=False):
            super().__init__()
            self.fc = nn.Linear(4, 2)
            self.inner = Inner() if fail else nn.Identity()

        def forward(self, x):
            return self.inner(self.fc(x))
    """
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(NET)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def assert_one_error(result: Result, starts: str) -> None:
    """Exit 2, and stderr is one ``error:`` line (plus at most a ``hint:``)."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith(starts), result.stderr
    assert all(line.startswith("hint: ") for line in lines[1:]), result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_doc_markdown_to_an_unwritable_path(project: Path) -> None:
    result = run("doc", "net.py:Net", "--input", "f32[2,4]", "--markdown", "/proc/x/net.md")
    assert_one_error(result, "error: cannot write /proc/x/net.md")


def test_ckpt_convert_to_an_unwritable_path(project: Path) -> None:
    torch.save({"w": torch.ones(2)}, project / "w.pt")
    result = run("ckpt", "convert", "w.pt", "-o", "/proc/x/w.safetensors")
    assert_one_error(result, "error: cannot write /proc/x/w.safetensors")


@pytest.mark.parametrize("command", ["inspect", "doc"])
def test_a_wrong_input_shape_is_one_line_without_torch_log_noise(
    command: str, project: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run(command, "net.py:Net", "--input", "f32[2,5]")
    assert_one_error(result, "error: forward of Net raised in fc (Linear) at net.py:")
    # torch logs FakeTensor fallbacks straight to the process's stderr, past CliRunner
    assert "fake_tensor" not in capfd.readouterr().err


@pytest.mark.parametrize("command", ["inspect", "doc"])
def test_a_forward_that_raises_names_the_submodule_and_the_users_line(
    command: str, project: Path
) -> None:
    result = run(command, "net.py:Net", "--input", "f32[2,4]", "--init-kwargs", '{"fail": true}')
    assert_one_error(
        result, "error: forward of Net raised in inner (Inner) at net.py:6: ValueError: boom"
    )


def test_a_syntax_error_points_at_the_users_file(project: Path) -> None:
    (project / "bad.py").write_text("import torch.nn as nn\nclass Net(nn.Module\n")
    result = run("inspect", "bad.py:Net", "--input", "f32[2,4]")
    assert_one_error(result, "error: importing bad.py raised at bad.py:2: SyntaxError:")


@pytest.mark.parametrize("command", ["scan", "inspect", "convert"])
def test_ckpt_missing_path_is_one_line(command: str, project: Path) -> None:
    extra = ["-o", "x.safetensors"] if command == "convert" else []
    result = run("ckpt", command, "nope.pt", *extra)
    assert_one_error(result, "error: nope.pt: no such file or directory")


def test_ckpt_convert_of_a_corrupt_file_names_the_path_once(project: Path) -> None:
    (project / "corrupt.pt").write_bytes(b"garbage")
    result = run("ckpt", "convert", "corrupt.pt", "-o", "x.safetensors")
    assert_one_error(result, "error: corrupt.pt: not a checkpoint")
    assert result.stderr.count("corrupt.pt") == 1
    assert not (project / "x.safetensors").exists()


def test_doc_diff_exits_1_when_it_would_change_a_file(project: Path) -> None:
    before = (project / "net.py").read_text()
    result = run("doc", "net.py:Net", "--input", "f32[2,4]", "--diff")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("---")
    assert (project / "net.py").read_text() == before


def _leaf_commands() -> list[tuple[str, click.Command]]:
    leaves: list[tuple[str, click.Command]] = []
    context = click.Context(app)
    for name in COMMANDS:
        command = app.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            group_context = click.Context(command, parent=context)
            for sub in command.list_commands(group_context):
                leaf = command.get_command(group_context, sub)
                assert leaf is not None
                leaves.append((f"{name} {sub}", leaf))
        else:
            leaves.append((name, command))
    return leaves


# Commands whose -o names the file they create (not a report), or that print no report.
_OUTPUT_IS_NOT_A_REPORT = {"ckpt convert", "mcp", "server"}  # their stdout is a protocol


@pytest.mark.parametrize(("name", "command"), _leaf_commands(), ids=lambda v: str(v))
def test_every_command_has_the_shared_output_options(name: str, command: click.Command) -> None:
    options = {opt for param in command.params for opt in getattr(param, "opts", [])}
    assert {"--color", "-q", "--quiet", "-v", "--verbose"} <= options, name
    if name not in _OUTPUT_IS_NOT_A_REPORT:
        assert {"-o", "--output"} <= options, name


def test_review_output_to_a_directory(project: Path) -> None:
    (project / "out").mkdir()
    result = run("review", "net.py", "-o", "out")
    assert_one_error(result, "error: cannot write out: it is a directory")


def test_review_of_no_python_files_exits_2(project: Path) -> None:
    (project / "empty").mkdir()
    result = run("review", "empty")
    assert_one_error(result, "error: no Python files found in empty")


def test_review_reads_stdin_under_the_name_given() -> None:
    source = "import torch\nx = torch.load('m.pt')\n"
    result = CliRunner().invoke(
        app, ["review", "-", "--stdin-filename", "train.py", "--no-cache"], input=source
    )
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("train.py:2:5: TW301")


def test_an_explicitly_named_excluded_file_is_reviewed_unless_forced(project: Path) -> None:
    (project / "train.py").write_text("import torch\nx = torch.load('m.pt')\n")
    (project / "pyproject.toml").write_text('[tool.torchwise]\nexclude = ["train.py"]\n')
    named = run("review", "train.py", "--no-cache")
    assert named.exit_code == 1 and "TW301" in named.stdout
    # pre-commit names every staged file: an excluded one is left out, said on stderr, exit 0
    forced = run("review", "train.py", "--no-cache", "--force-exclude")
    assert forced.exit_code == 0, forced.output
    assert forced.stderr.startswith("train.py: excluded by `exclude` in [tool.torchwise]")
    assert "TW301" not in forced.stdout


def test_doctor_names_the_submodule_and_the_users_line_too(project: Path) -> None:
    result = run(
        "doctor", "net.py:Net", "--input", "f32[2,4]", "--init-kwargs", '{"fail": true}',
        "--checks", "grad-flow",
    )  # fmt: skip
    assert_one_error(
        result, "error: forward of Net raised in inner (Inner) at net.py:6: ValueError: boom"
    )


def test_doctor_help_lists_the_check_ids() -> None:
    from torchwise.doctor import CHECK_IDS

    result = run("doctor", "--help")
    assert result.exit_code == 0
    assert all(check_id in result.stdout for check_id in CHECK_IDS)
