"""The ckpt commands as a newcomer meets them: one clear line and exit 2 for bad input,
reports to -o, progress only on a terminal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ckpt_corpus import Hostile
from click.testing import CliRunner

from torchwise.cli import app
from torchwise.console import Console


@pytest.mark.parametrize(
    "argv",
    [["scan"], ["inspect"], ["convert", "-o", "out.safetensors"]],
    ids=["scan", "inspect", "convert"],
)
def test_missing_path_is_one_line_and_exit_2(argv: list[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "such.pt")
    result = CliRunner().invoke(app, ["ckpt", *argv[:1], missing, *argv[1:]])
    assert result.exit_code == 2
    assert result.stderr == f"error: {missing}: no such file or directory\n"


def test_convert_corrupt_file_names_it_once(benign: dict[str, Path], tmp_path: Path) -> None:
    cut = tmp_path / "corrupt.pt"
    cut.write_bytes(benign["legacy format"].read_bytes()[:300])
    result = CliRunner().invoke(app, ["ckpt", "convert", str(cut), "-o", str(tmp_path / "o.st")])
    assert result.exit_code == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {cut}: ") and first.count(str(cut)) == 1, first
    assert "internal error" not in result.stderr


def test_convert_into_a_directory_or_nowhere(benign: dict[str, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    into_dir = runner.invoke(
        app, ["ckpt", "convert", str(benign["state dict"]), "-o", str(tmp_path)]
    )
    assert into_dir.exit_code == 2
    assert (
        into_dir.stderr
        == f"error: cannot write {tmp_path}: it is a directory, not a .safetensors file\n"
    )
    blocked = tmp_path / "file"
    blocked.write_text("x")
    nowhere = runner.invoke(
        app, ["ckpt", "convert", str(benign["state dict"]), "-o", str(blocked / "m.safetensors")]
    )
    assert nowhere.exit_code == 2
    assert nowhere.stderr.splitlines() == [
        f"error: cannot write {blocked / 'm.safetensors'}: {blocked} is not a writable directory"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_convert_into_a_read_only_directory(benign: dict[str, Path], tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = CliRunner().invoke(
        app, ["ckpt", "convert", str(benign["state dict"]), "-o", str(locked / "m.safetensors")]
    )
    assert result.exit_code == 2 and "not a writable directory" in result.stderr


def test_reports_go_to_output_files(
    benign: dict[str, Path], hostile: dict[str, Hostile], tmp_path: Path
) -> None:
    runner = CliRunner()
    report = tmp_path / "scan.json"
    bad = runner.invoke(
        app, ["ckpt", "scan", str(hostile["os.system"].path), "--format", "json", "-o", str(report)]
    )
    assert bad.exit_code == 1 and bad.stdout == ""
    assert json.loads(report.read_text())["files"][0]["verdict"] == "unsafe"
    listing = tmp_path / "inspect.txt"
    ok = runner.invoke(app, ["ckpt", "inspect", str(benign["state dict"]), "-o", str(listing)])
    assert ok.exit_code == 0 and ok.stdout == ""
    assert "parameters" in listing.read_text()
    into_dir = runner.invoke(app, ["ckpt", "scan", str(benign["state dict"]), "-o", str(tmp_path)])
    assert into_dir.exit_code == 2 and into_dir.stderr.startswith(f"error: cannot write {tmp_path}")


def test_no_control_codes_off_a_terminal(benign: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["ckpt", "scan", str(benign["state dict"].parent)])
    assert result.exit_code == 0
    assert "\x1b" not in result.stdout + result.stderr


def test_directory_scan_shows_progress_on_a_terminal(
    benign: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Console, "show_progress", lambda self: True)
    result = CliRunner().invoke(app, ["ckpt", "scan", str(benign["state dict"].parent)])
    assert result.exit_code == 0, result.output
    assert "safe" in result.stdout


def test_convert_shows_progress_on_a_terminal(
    benign: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(Console, "show_progress", lambda self: True)
    out = tmp_path / "m.safetensors"
    result = CliRunner().invoke(app, ["ckpt", "convert", str(benign["state dict"]), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "read back identical" in result.stdout and out.exists()


def test_quiet_scan_prints_only_the_report(benign: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["ckpt", "scan", "-q", str(benign["state dict"])])
    assert result.exit_code == 0 and result.stderr == ""


def test_allow_that_is_not_a_name_is_one_line(benign: dict[str, Path]) -> None:
    for command in (["scan"], ["convert", "-o", "x.safetensors"]):
        result = CliRunner().invoke(
            app,
            ["ckpt", command[0], str(benign["state dict"]), *command[1:], "--allow", "not a name"],
        )
        assert result.exit_code == 2
        lines = result.stderr.splitlines()
        assert lines[0] == "error: --allow 'not a name' is not a global's name", lines
        assert "internal error" not in result.stderr


@pytest.mark.parametrize("command", ["inspect", "scan", "convert"])
def test_an_unreadable_file_is_one_line(
    command: str, benign: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every OSError while reading is `cannot read PATH: reason`, exit 2 (never internal)."""
    path = benign["state dict"]
    real_open = Path.open

    def refuse(self: Path, *args: object, **kwargs: object) -> object:
        if self == path:
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", refuse)
    argv = ["ckpt", command, str(path)] + (["-o", str(tmp_path / "o.st")] * (command == "convert"))
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert f"cannot read {path}: Permission denied" in result.output + result.stderr
    assert "internal error" not in result.output + result.stderr


def test_inspect_summarises_optimizer_state_unless_all(benign: dict[str, Path]) -> None:
    path = str(benign["training checkpoint"])
    summary = CliRunner().invoke(app, ["ckpt", "inspect", path])
    assert summary.exit_code == 0
    assert "optimizer.state.0.exp_avg " not in summary.output
    assert "18 state tensors, 266 elements (exp_avg 130, exp_avg_sq 130, step 6)" in summary.output
    every = CliRunner().invoke(app, ["ckpt", "inspect", path, "--all"])
    assert "optimizer.state.0.exp_avg " in every.output
    assert "state tensors" not in every.output


def test_sarif_uris_are_relative_to_the_working_directory(
    benign: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = benign["state dict"].parent
    monkeypatch.chdir(folder)
    result = CliRunner().invoke(app, ["ckpt", "scan", "numpy.pt", "--format", "sarif"])
    log = json.loads(result.output)
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"]
                 for r in log["runs"][0]["results"]]  # fmt: skip
    assert locations and all(
        loc == {"uri": "numpy.pt", "uriBaseId": "%SRCROOT%"} for loc in locations
    ), locations
