"""What a newcomer met (issue 26): `review -q`, `project` on a folder without Python."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from torchwise.cli import app

TRAIN = "import torch\nstate = torch.load('m.pt')\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def test_review_quiet_prints_the_findings_and_nothing_else(project: Path) -> None:
    loud = CliRunner().invoke(app, ["review", "train.py", "--no-cache"])
    quiet = CliRunner().invoke(app, ["review", "-q", "train.py", "--no-cache"])
    assert loud.exit_code == quiet.exit_code == 1
    assert "Found 1 problem" in loud.stdout
    assert quiet.stdout.splitlines() == [
        line for line in loud.stdout.splitlines() if line.startswith("train.py:")
    ]
    assert quiet.stderr == ""


def test_review_quiet_on_clean_code_prints_nothing(project: Path) -> None:
    result = CliRunner().invoke(app, ["review", "--quiet", "clean.py", "--no-cache"])
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == ""


def test_review_quiet_keeps_machine_formats_whole(project: Path) -> None:
    result = CliRunner().invoke(app, ["review", "-q", "train.py", "--format", "json", "--no-cache"])
    assert result.exit_code == 1 and '"findings"' in result.stdout


def test_project_on_a_folder_without_python_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# notes\n")
    (tmp_path / "model.pt").write_bytes(b"\x80\x02}q\x00.")
    result = CliRunner().invoke(app, ["project", str(tmp_path), "--no-import"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: no Python files found in {tmp_path.resolve()}"
    assert lines[1].startswith("hint: ") and "torchwise ckpt scan" in lines[1]
