"""The check table: stable codes, ruff-style documentation, and the commands that show it."""

from __future__ import annotations

import ast
import re

import pytest
from click.testing import CliRunner

from torchwise.cli import app
from torchwise.run.catalog import FAMILIES, REQUIRED_HEADINGS, all_checks, explain, get_check, table

CHECKS = all_checks()


def test_codes_are_unique_stable_and_in_their_family() -> None:
    assert len(CHECKS) >= 18
    for code, check in CHECKS.items():
        assert re.fullmatch(r"TWR\d{3}", code)
        assert check.family in FAMILIES
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", check.name), check.name
    assert len({check.name for check in CHECKS.values()}) == len(CHECKS)


@pytest.mark.parametrize("code", sorted(CHECKS))
def test_every_check_is_documented_with_runnable_scripts(code: str) -> None:
    check = CHECKS[code]
    for heading in REQUIRED_HEADINGS:
        assert heading in check.doc, f"{code} lacks {heading}"
    assert check.summary.endswith("."), check.summary
    for script in (check.example(), check.use_instead()):
        assert script.strip(), f"{code}: an empty script"
        ast.parse(script)


def test_explain_and_table() -> None:
    text = explain("twr101")
    assert text.startswith("# TWR101 gradients-accumulate-across-steps")
    assert "Severity: error." in text and "## Use instead" in text
    listed = [line.split()[0] for line in table().splitlines()]
    assert listed == list(CHECKS)
    assert get_check("TWR999") is None


def test_run_explain_and_list_need_no_script() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--explain", "TWR201"])
    assert result.exit_code == 0
    assert result.stdout.startswith("# TWR201 evaluation-in-train-mode")
    result = runner.invoke(app, ["run", "--list-checks"])
    assert result.exit_code == 0 and "TWR301" in result.stdout
    result = runner.invoke(app, ["run", "--explain", "TWR999"])
    assert result.exit_code == 2 and "no run check 'TWR999'" in result.stderr


def test_rules_explains_run_checks_too() -> None:
    result = CliRunner().invoke(app, ["rules", "TWR101"])
    assert result.exit_code == 0
    assert result.stdout.startswith("# TWR101 gradients-accumulate-across-steps")


def test_docs_run_md_lists_every_check() -> None:
    from pathlib import Path

    from torchwise.run.catalog import markdown_index

    page = (Path(__file__).parents[2] / "docs" / "run.md").read_text(encoding="utf-8")
    assert markdown_index() in page, "docs/run.md's check list is stale: regenerate it"
