"""``torchwise review`` as a user runs it: exit codes, discovery, notebooks, fixes, cache, jobs."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from torchwise.cli import app
from torchwise.review import Applicability, all_rules

FIXTURES = Path(__file__).parent / "fixtures"

# Two deprecated calls with safe fixes; TW401 and TW406 are the engine's own rules.
BUGGY = """\
import torch
from torch.autograd import Variable

scaler = torch.cuda.amp.GradScaler()
x = torch.norm(torch.ones(2))
"""
CLEAN = """\
import torch

scaler = torch.amp.GradScaler("cuda")
x = torch.ones(2)
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(app, ["review", *args])


def findings(*args: str) -> list[dict[str, object]]:
    result = run(*args, "--format", "json", "--no-cache")
    assert result.exit_code in (0, 1), result.output
    document = json.loads(result.stdout)
    found: list[dict[str, object]] = document["findings"]
    return found


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "buggy.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_exit_codes_follow_findings(project: Path) -> None:
    assert run("clean.py", "--no-cache").exit_code == 0
    result = run("buggy.py", "--no-cache")
    assert result.exit_code == 1
    assert "buggy.py:4:10: TW401" in result.stdout
    assert "buggy.py:5:5: TW406" in result.stdout
    assert run("buggy.py", "--no-cache", "--exit-zero").exit_code == 0


def test_missing_path_is_a_clear_error(project: Path) -> None:
    result = run("nope.py", "--no-cache")
    assert result.exit_code == 2
    assert "path does not exist: nope.py" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_unknown_rule_code_exits_2(project: Path, option: str) -> None:
    result = run("clean.py", option, "TW999")
    assert result.exit_code == 2
    assert "unknown rule code or prefix 'TW999'" in result.stderr


def test_bad_format_is_a_usage_error(project: Path) -> None:
    assert run("clean.py", "--format", "xml").exit_code == 2


def test_syntax_error_is_tw000_and_other_files_are_still_reviewed(project: Path) -> None:
    (project / "broken.py").write_text("def f(:\n    pass\n")
    found = findings(".")
    by_file = {(f["path"], f["code"]) for f in found}
    assert ("broken.py", "TW000") in by_file
    assert ("buggy.py", "TW401") in by_file
    broken = next(f for f in found if f["code"] == "TW000")
    assert broken["line"] == 1 and str(broken["message"]).startswith("file could not be parsed")


def test_undecodable_file_is_tw000(project: Path) -> None:
    (project / "latin.py").write_bytes(b"x = '\xe9'\n")
    found = findings("latin.py")
    assert [f["code"] for f in found] == ["TW000"]
    assert "UTF-8" in str(found[0]["message"])


def _notebook(cells: list[tuple[str, str]]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True)}
                for kind, text in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_notebook_findings_name_the_cell(project: Path) -> None:
    (project / "nb.ipynb").write_text(
        _notebook(
            [
                ("markdown", "# Training\nsome prose\n"),
                ("code", "import torch\n"),
                ("code", "%matplotlib inline\nscaler = torch.cuda.amp.GradScaler()\n"),
            ]
        )
    )
    result = run("nb.ipynb", "--no-cache")
    assert result.exit_code == 1
    assert "nb.ipynb:cell 2:2:10: TW401" in result.stdout
    (finding,) = findings("nb.ipynb")
    assert (finding["cell"], finding["cell_line"], finding["location"]) == (
        2,
        2,
        "nb.ipynb:cell 2:2:10",
    )


def test_notebook_shell_escapes_continued_and_cell_magics_are_not_python(project: Path) -> None:
    (project / "nb.ipynb").write_text(
        _notebook(
            [
                ("code", "!pip install -q \\\n    torch \\\n    peft\nimport torch\n"),
                ("code", "%%bash\nif [ -d x ]; then\n  echo yes\nfi\n"),
                ("code", "import os\nif os.environ.get('COLAB'):\n    VERSION = !curl -s x\n"),
                ("code", "output = !python demo.py \\\n--model x \\\n--data y\n"),
                (
                    "code",
                    "if True:\n    !pip install q \\\nr\nscaler = torch.cuda.amp.GradScaler()\n",
                ),
            ]
        )
    )
    result = run("nb.ipynb", "--no-cache")
    assert "TW000" not in result.stdout
    assert "nb.ipynb:cell 5:4:10: TW401" in result.stdout


def test_gitignored_and_virtualenv_files_are_skipped(project: Path) -> None:
    (project / ".gitignore").write_text("generated/\nscratch_*.py\n")
    for relative in ("generated/model.py", "scratch_1.py", ".venv/lib/site.py", "build/x.py"):
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BUGGY)
    (project / "pkg").mkdir()
    (project / "pkg" / "kept.py").write_text(BUGGY)
    paths = {str(f["path"]) for f in findings(".")}
    assert paths == {"buggy.py", "pkg/kept.py"}
    # A file named explicitly is reviewed even when ignored.
    assert {str(f["path"]) for f in findings("scratch_1.py")} == {"scratch_1.py"}


def test_extensionless_python_scripts_are_reviewed(project: Path) -> None:
    (project / "train").write_text("#!/usr/bin/env python3\n" + BUGGY)
    (project / "run").write_text("#!/bin/sh\npython train\n")
    (project / "LICENSE").write_text("MIT\n")
    paths = {str(f["path"]) for f in findings(".")}
    assert paths == {"buggy.py", "train"}


def test_fix_writes_safe_fixes_reparses_and_is_idempotent(project: Path) -> None:
    result = run("buggy.py", "--fix", "--no-cache")
    fixed = (project / "buggy.py").read_text()
    ast.parse(fixed)
    assert 'torch.amp.GradScaler("cuda")' in fixed and "Variable(" not in fixed.split("\n", 2)[2]
    assert result.exit_code == 0, result.output  # nothing left to report
    assert "Applied 2 fixes" in result.stdout
    again = run("buggy.py", "--fix", "--no-cache")
    assert again.exit_code == 0
    assert (project / "buggy.py").read_text() == fixed


def test_fix_never_touches_a_file_that_does_not_parse(project: Path) -> None:
    broken = BUGGY + "def f(:\n"
    (project / "broken.py").write_text(broken)
    run("broken.py", "--fix", "--unsafe-fixes", "--no-cache")
    assert (project / "broken.py").read_text() == broken


def test_diff_prints_the_fix_and_writes_nothing(project: Path) -> None:
    result = run("buggy.py", "--diff", "--no-cache")
    assert result.exit_code == 1
    assert "--- a/buggy.py" in result.stdout and "+++ b/buggy.py" in result.stdout
    assert '+scaler = torch.amp.GradScaler("cuda")' in result.stdout
    assert "-scaler = torch.cuda.amp.GradScaler()" in result.stdout
    assert (project / "buggy.py").read_text() == BUGGY
    assert run("clean.py", "--diff", "--no-cache").exit_code == 0


UNSAFE = sorted(
    code
    for code, info in all_rules().items()
    if info.fix is Applicability.UNSAFE and (FIXTURES / f"{code}.fixed.py").exists()
)


def test_some_rules_offer_unsafe_fixes() -> None:
    assert UNSAFE, "the unsafe-fix test below would run on nothing"


@pytest.mark.parametrize("code", UNSAFE)
def test_unsafe_fixes_apply_only_when_asked(project: Path, code: str) -> None:
    source = (FIXTURES / f"{code}.py").read_text()
    expected = (FIXTURES / f"{code}.fixed.py").read_text()
    target = project / "target.py"
    target.write_text(source)
    run("target.py", "--select", code, "--fix", "--no-cache")
    safe_only = target.read_text()
    assert safe_only != expected, f"{code}: --fix alone applied the unsafe fixes"
    run("target.py", "--select", code, "--fix", "--unsafe-fixes", "--no-cache")
    assert target.read_text() == expected


def test_fix_is_idempotent_and_parse_preserving_on_every_fixture(project: Path) -> None:
    corpus = project / "corpus"
    corpus.mkdir()
    for fixture in FIXTURES.glob("TW*.py"):
        if not fixture.name.endswith(".fixed.py"):
            shutil.copy(fixture, corpus / fixture.name)
    run("corpus", "--select", "ALL", "--fix", "--unsafe-fixes", "--no-cache", "--jobs", "1")
    once = {path.name: path.read_text() for path in corpus.iterdir()}
    for name, text in once.items():
        ast.parse(text, filename=name)
    run("corpus", "--select", "ALL", "--fix", "--unsafe-fixes", "--no-cache", "--jobs", "1")
    assert {path.name: path.read_text() for path in corpus.iterdir()} == once


def test_jobs_2_matches_jobs_1(project: Path) -> None:
    for number in range(20):
        (project / f"m{number:02}.py").write_text(BUGGY if number % 3 else CLEAN)
    (project / "m_broken.py").write_text("x = (\n")
    one = run(".", "--format", "json", "--no-cache", "--jobs", "1")
    two = run(".", "--format", "json", "--no-cache", "--jobs", "2")
    assert one.exit_code == two.exit_code == 1
    assert json.loads(one.stdout) == json.loads(two.stdout)
    assert json.loads(one.stdout)["summary"]["files"] == 23


def test_warm_cache_gives_identical_findings_and_a_changed_file_is_reanalysed(
    project: Path,
) -> None:
    cold = run(".", "--format", "json")
    assert (project / ".torchwise_cache").is_dir()
    warm = run(".", "--format", "json")
    assert cold.exit_code == warm.exit_code == 1
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    (project / "clean.py").write_text(CLEAN + "y = torch.norm(x)\n")
    changed = json.loads(run(".", "--format", "json").stdout)
    assert ("clean.py", "TW406") in {(f["path"], f["code"]) for f in changed["findings"]}
    assert changed["summary"]["findings"] == json.loads(cold.stdout)["summary"]["findings"] + 1


def test_no_cache_writes_no_cache(project: Path) -> None:
    run(".", "--no-cache")
    assert not (project / ".torchwise_cache").exists()


def test_output_file(project: Path) -> None:
    result = run("buggy.py", "--format", "json", "-o", "out/report.json", "--no-cache")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert json.loads((project / "out" / "report.json").read_text())["summary"]["findings"] == 2


def test_text_colour_only_when_asked(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\x1b[" not in run("buggy.py", "--no-cache").stdout
    assert "\x1b[" in run("buggy.py", "--no-cache", "--color", "always").stdout
    assert "\x1b[" not in run("buggy.py", "--no-cache", "--color", "never").stdout
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in run("buggy.py", "--no-cache").stdout
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR")
    assert "\x1b[" not in run("buggy.py", "--no-cache", "--color", "auto").stdout


# -- issue 10: stdin, empty runs, excluded files, progress, the library default ------------
def test_stdin_is_reviewed_as_the_named_file(project: Path) -> None:
    result = CliRunner().invoke(
        app, ["review", "-", "--stdin-filename", "pkg/buffer.py", "--no-cache"], input=BUGGY
    )
    assert result.exit_code == 1
    assert "pkg/buffer.py:4:10: TW401" in result.stdout


def test_stdin_fix_prints_the_fixed_code(project: Path) -> None:
    result = CliRunner().invoke(app, ["review", "-", "--fix", "--quiet"], input=BUGGY)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        'import torch\nfrom torch.autograd import Variable\n\nscaler = torch.amp.GradScaler("cuda")'
        "\nx = torch.linalg.vector_norm(torch.ones(2))\n"
    )


def test_stdin_filename_needs_stdin(project: Path) -> None:
    result = run("buggy.py", "--stdin-filename", "x.py")
    assert result.exit_code == 2
    assert "--stdin-filename only applies to PATH '-'" in result.stderr


def test_an_empty_run_is_an_error(project: Path) -> None:
    (project / "empty").mkdir()
    (project / "empty" / "notes.txt").write_text("no code here\n")
    result = run("empty", "--no-cache")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[0] == "error: no Python files found in empty"


def test_an_excluded_file_named_explicitly(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchwise]\nexclude = ["buggy.py"]\n')
    # Named explicitly: reviewed, as ruff does and as docs/review.md says.
    assert run("buggy.py", "--no-cache").exit_code == 1
    # With --force-exclude (pre-commit): left out, and the run says so.
    result = run("buggy.py", "--no-cache", "--force-exclude")
    assert result.exit_code == 0
    assert result.stderr.strip() == (
        "buggy.py: excluded by `exclude` in [tool.torchwise] (--force-exclude)"
    )
    assert run("buggy.py", "--no-cache", "--force-exclude", "--quiet").stderr == ""


def test_progress_goes_to_stderr_only_on_a_terminal(project: Path) -> None:
    for number in range(25):
        (project / f"m{number:02}.py").write_text(CLEAN)
    result = run(".", "--no-cache", "--jobs", "1")
    assert result.exit_code == 1
    assert "Reviewing" not in result.stderr  # not a terminal: no progress display


def test_progress_is_reported_per_file(project: Path) -> None:
    from torchwise.review import review_paths

    for number in range(5):
        (project / f"m{number:02}.py").write_text(CLEAN)
    steps: list[int] = []
    report = review_paths([project], jobs=1, progress=steps.append)
    assert sum(steps) == len(report.files) == 7


def test_review_paths_has_default_settings(project: Path) -> None:
    from torchwise.review import review_paths

    report = review_paths([project / "buggy.py"])
    assert {f.code for f in report.findings} == {"TW401", "TW406"}


def test_review_paths_leaves_the_garbage_collector_as_it_found_it(project: Path) -> None:
    """The run slows the collector down and freezes its trees; a library caller's
    process gets both back."""
    import gc

    from torchwise.review import review_paths

    before = gc.get_threshold()
    review_paths([project], jobs=1)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_many_files_report_progress_through_the_console(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib

    from torchwise.console import Console, ProgressHandle

    for number in range(25):
        (project / f"m{number:02}.py").write_text(CLEAN)
    seen: list[tuple[int | None, str, int]] = []

    class Counting(ProgressHandle):
        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def advance(self, steps: int = 1, *, label: str | None = None) -> None:
            self.count += steps

    @contextlib.contextmanager
    def progress(self: Console, total: int | None, description: str):  # type: ignore[no-untyped-def]
        handle = Counting()
        yield handle
        seen.append((total, description, handle.count))

    monkeypatch.setattr(Console, "progress", progress)
    assert run(".", "--no-cache", "--jobs", "1").exit_code == 1
    assert seen == [(27, "Reviewing", 27)]
