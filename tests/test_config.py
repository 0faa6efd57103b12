"""``[tool.torchwise]``: found, parsed, and never silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from torchwise.cli import app
from torchwise.config import load_config
from torchwise.errors import ConfigError


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(body)
    return path


def test_known_keys_load_in_either_spelling(tmp_path: Path) -> None:
    write(
        tmp_path,
        '[tool.torchwise]\nselect = ["TW1"]\nmin_torch_version = "2.4"\n'
        '[tool.torchwise.models.net]\ntarget = "m.py:Net"\ninit_kwargs = {}\n',
    )
    config = load_config(tmp_path)
    assert config.get("min-torch-version") == "2.4"
    assert config.get("models")["net"]["target"] == "m.py:Net"


@pytest.mark.parametrize(
    ("body", "message", "hint"),
    [
        ('[tool.torchwise]\nselectt = ["TW1"]\n', "unknown key 'selectt' in [tool.torchwise]",
         "did you mean 'select'?"),
        ('[tool.torchwise]\nper_file_ignore = {}\n', "unknown key 'per_file_ignore'",
         "did you mean 'per-file-ignores'?"),
        ('[tool.torchwise.models.net]\ntarget = "m.py:Net"\ninput = "f32[1]"\ninitkwargs = {}\n',
         "unknown key 'initkwargs' in [tool.torchwise.models.net]", "did you mean 'init-kwargs'?"),
        ('[tool.torchwise]\ncolour = "x"\n', "unknown key 'colour'", "known keys: "),
    ],
)  # fmt: skip
def test_an_unknown_key_is_an_error_with_a_suggestion(
    tmp_path: Path, body: str, message: str, hint: str
) -> None:
    write(tmp_path, body)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert message in caught.value.message
    assert caught.value.hint is not None and caught.value.hint.startswith(hint)


def test_a_model_entry_must_be_a_table(tmp_path: Path) -> None:
    write(tmp_path, '[tool.torchwise.models]\nnet = "m.py:Net"\n')
    with pytest.raises(ConfigError, match=r"\[tool.torchwise.models.net\] must be a table"):
        load_config(tmp_path)


def test_the_cli_reports_a_config_typo_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, '[tool.torchwise]\nselectt = ["TW1"]\n')
    (tmp_path / "a.py").write_text("import torch\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["review", "a.py", "--no-cache"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {tmp_path / 'pyproject.toml'}: unknown key 'selectt' in [tool.torchwise]",
        "hint: did you mean 'select'?",
    ]
