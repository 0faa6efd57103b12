"""Suppression and configuration: noqa, ``[tool.torchwise]``, flags over config, ``rules``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from torchwise.cli import app
from torchwise.review import all_rules

AMP = "scaler = torch.cuda.amp.GradScaler()"  # TW401
VAR = "x = torch.norm(torch.ones(2))"  # TW406


def review(*args: str) -> Result:
    return CliRunner().invoke(app, ["review", "--no-cache", "--format", "json", *args])


def codes(*args: str) -> set[tuple[str, str]]:
    result = review(*args)
    assert result.exit_code in (0, 1), result.output
    return {(str(f["path"]), str(f["code"])) for f in json.loads(result.stdout)["findings"]}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(f"import torch\n{AMP}\n{VAR}\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_train.py").write_text(f"import torch\n{AMP}\n{VAR}\n")
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old.py").write_text(f"import torch\n{AMP}\n")
    return tmp_path


def configure(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text(f"[project]\nname = 'demo'\n\n[tool.torchwise]\n{body}")


def test_line_noqa(project: Path) -> None:
    (project / "n.py").write_text(
        "import torch\n"
        f"{AMP}  # noqa: TW401\n"
        f"{AMP}  # noqa\n"
        f"{AMP}  # noqa: TW406\n"  # another code: still reported
        f"{VAR}  # NOQA:TW401,TW406\n"
    )
    result = json.loads(review("n.py").stdout)
    assert [(f["line"], f["code"]) for f in result["findings"]] == [(4, "TW401")]


def test_file_noqa(project: Path) -> None:
    (project / "all.py").write_text(f"# torchwise: noqa\nimport torch\n{AMP}\n{VAR}\n")
    (project / "some.py").write_text(f"import torch\n# torchwise: noqa: TW401\n{AMP}\n{VAR}\n")
    assert codes("all.py", "some.py") == {("some.py", "TW406")}


def test_select_and_ignore_from_config(project: Path) -> None:
    configure(project, 'select = ["TW4"]\nignore = ["TW406"]\n')
    assert codes("train.py") == {("train.py", "TW401")}


def test_command_line_select_replaces_config(project: Path) -> None:
    configure(project, 'select = ["TW401"]\n')
    assert codes("train.py", "--select", "TW406") == {("train.py", "TW406")}
    # --ignore adds to the configured ignores
    assert codes("train.py", "--ignore", "TW401") == set()


def test_extend_select_enables_rules_that_are_off_by_default(project: Path) -> None:
    off = sorted(code for code, info in all_rules().items() if not info.default_enabled)
    configure(project, 'select = ["TW401"]\nextend-select = ["TW406"]\n')
    assert codes("train.py") == {("train.py", "TW401"), ("train.py", "TW406")}
    if off:
        (project / "pyproject.toml").unlink()
        result = json.loads(review("train.py").stdout)
        assert not {f["code"] for f in result["findings"]} & set(off)


def test_per_file_ignores_and_exclude(project: Path) -> None:
    configure(
        project,
        'exclude = ["legacy"]\n[tool.torchwise.per-file-ignores]\n"tests/*" = ["TW401"]\n',
    )
    assert codes(".") == {
        ("train.py", "TW401"),
        ("train.py", "TW406"),
        ("tests/test_train.py", "TW406"),
    }


def test_underscore_keys_and_explicit_config_file(project: Path) -> None:
    other = project / "conf" / "pyproject.toml"
    other.parent.mkdir()
    other.write_text('[tool.torchwise]\nextend_select = []\nignore = ["TW401"]\n')
    assert codes("train.py", "--config", str(other)) == {("train.py", "TW406")}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('select = ["TW9"]\n', "unknown rule code or prefix 'TW9'"),
        ('min-torch-version = "two"\n', "min-torch-version must look like '2.4'"),
        ("ignore = 3\n", "ignore must be a list of strings"),
        ("select = [\n", "pyproject.toml"),
    ],
)
def test_bad_config_is_a_clear_error(project: Path, body: str, message: str) -> None:
    configure(project, body)
    result = review("train.py")
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_min_torch_version_from_config_and_flag(project: Path) -> None:
    (project / "load.py").write_text('import torch\nstate = torch.load("model.pt")\n')
    configure(project, 'min-torch-version = "2.4"\n')
    assert ("load.py", "TW301") in codes("load.py")
    assert ("load.py", "TW301") not in codes("load.py", "--min-torch-version", "2.6")
    configure(project, 'min-torch-version = "2.6"\n')
    assert ("load.py", "TW301") not in codes("load.py")


def rules(*args: str) -> Result:
    return CliRunner().invoke(app, ["rules", *args])


def test_rules_lists_every_rule() -> None:
    result = rules()
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("TW")]
    assert listed == list(all_rules())
    listed_json = json.loads(rules("--format", "json").stdout)
    assert [item["code"] for item in listed_json] == list(all_rules())


@pytest.mark.parametrize("code", sorted(all_rules()))
def test_rules_code_prints_its_documentation(code: str) -> None:
    info = all_rules()[code]
    result = rules(code.lower())
    assert result.exit_code == 0
    assert result.stdout.startswith(f"# {code} {info.name}")
    assert f"Severity: {info.severity.value}." in result.stdout
    assert "## What it does" in result.stdout


def test_rules_tw401() -> None:
    result = rules("TW401")
    assert 'torch.amp.GradScaler("cuda")' in result.stdout
    assert "Fix: safe." in result.stdout


def test_unknown_rule_exits_2() -> None:
    result = rules("TW999")
    assert result.exit_code == 2
    assert "no rule 'TW999'" in result.stderr
