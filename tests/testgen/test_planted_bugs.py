"""The generated tests pass on healthy models and fail on each planted bug doctor catches.

Tests are generated once for each healthy model: a small classifier, a
nanoGPT-style GPT, and the example project's CifarNet (through its configured
name). Each planted bug then replaces the model file in a copy of its project,
next to the *same* generated test module, and one pytest run per test below (a
subprocess, as a user runs it) executes them. Healthy projects must pass whole;
each bug must make the generated test named for it fail. (Which other generated
tests each bug fails is in docs/tests.md.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from testgen_models import BUGS, CIFAR_BUGS, GPT, NET, Bug

from torchwise.testgen import GeneratedTests, write_tests

EXAMPLE = Path(__file__).parents[2] / "examples" / "cifar_project"
GPT_INPUTS = "i64[batch=2,seq=16]<64, i64[batch=2,seq=16]<64"
#: The doctor checks that catch the planted bugs (generation runs each test once, so
#: leaving out the others keeps this quick; the example project gets every check).
CATCHING = {
    source: sorted({b.caught_by[len("test_doctor[") : -1] for b in BUGS
                    if b.source == source and b.caught_by.startswith("test_doctor[")})
    for source in ("net", "gpt")
}  # fmt: skip

#: Set aside each project's model module before pytest imports the next project's
#: tests: every project names its module the same (net.py, gpt.py), as users' do.
CONFTEST = textwrap.dedent(
    """
    import sys

    def pytest_collect_file(file_path, parent):
        for name in ("net", "gpt", "model"):
            sys.modules.pop(name, None)
    """
)


def _project(root: Path, name: str, files: dict[str, str]) -> Path:
    project = root / name
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for file, text in files.items():
        (project / file).write_text(text)
    return project


def _plant(root: Path, bug: Bug, healthy: str, generated: GeneratedTests) -> str:
    """A copy of the project with the bug in its model, next to the same generated tests;
    returns the pytest node id of the test that must catch it."""
    project = _project(root, bug.name.replace("-", "_"), {f"{bug.source}.py": bug.plant(healthy)})
    (project / "tests").mkdir()
    (project / "tests" / generated.path.name).write_text(generated.text)
    return f"{project.name}/tests/{generated.path.name}::{bug.caught_by}"


def _run_pytest(root: Path, selected: list[str]) -> dict[str, dict[str, str]]:
    """Run the selected projects and tests under ``root`` in one pytest process: project ->
    test -> outcome. A healthy project runs whole; a planted bug runs the test that must
    catch it (the healthy run shows that test passes without the bug)."""
    (root / "conftest.py").write_text(CONFTEST)
    junit = root / "junit.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "--import-mode=importlib", "--rootdir", str(root), "--junitxml", str(junit), *selected],
        cwd=root, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert junit.is_file(), run.stdout + run.stderr
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
        found[case.get("classname", "").split(".")[0]][case.get("name", "")] = outcome
    assert found, run.stdout[-3000:]
    return found


def _assert_outcomes(found: dict[str, dict[str, str]], healthy: list[str], bugs: list[Bug]) -> None:
    for project in healthy:
        broken = [t for t, o in found[project].items() if o not in ("passed", "skipped")]
        assert found[project] and not broken, f"{project}: {broken}"
    missed = []
    for bug in bugs:
        failed = sorted(t for t, o in found[bug.name.replace("-", "_")].items() if o == "failed")
        if bug.caught_by not in failed:
            missed.append(f"{bug.name}: expected {bug.caught_by} to fail; failed: {failed}")
    assert not missed, "\n".join(missed)


@pytest.mark.slow
def test_small_classifier_and_gpt_tests_catch_every_planted_bug(tmp_path: Path) -> None:
    net = _project(tmp_path, "net_healthy", {"net.py": NET})
    gpt = _project(tmp_path, "gpt_healthy", {"gpt.py": GPT})
    generated = {
        "net": write_tests(str(net / "net.py:Net"), inputs=["f32[batch=8,12]"],
                           output=net / "tests" / "test_net.py",
                           checks=[*CATCHING["net"], "causal-leak"]),
        "gpt": write_tests(str(gpt / "gpt.py"), build="GPT(GPTConfig())", inputs=[GPT_INPUTS],
                           output=gpt / "tests" / "test_gpt.py", checks=CATCHING["gpt"]),
    }  # fmt: skip
    # Measured, not told: the GPT is causal along the sequence dim, the classifier is not.
    assert generated["gpt"].doctor_options["causal_dim"] == 1
    assert "causal-leak" in generated["gpt"].included_checks
    assert "causal-leak" not in generated["net"].included_checks
    selected = ["net_healthy", "gpt_healthy"]
    for bug in BUGS:
        healthy = {"net": NET, "gpt": GPT}[bug.source]
        selected.append(_plant(tmp_path, bug, healthy, generated[bug.source]))
    _assert_outcomes(_run_pytest(tmp_path, selected), ["net_healthy", "gpt_healthy"], BUGS)


@pytest.mark.slow
def test_example_project_tests_pass_and_catch_planted_bugs(tmp_path: Path) -> None:
    cifar = tmp_path / "cifar_healthy"
    shutil.copytree(EXAMPLE, cifar)
    generated = write_tests(
        "cifarnet", config_start=cifar, output=cifar / "tests" / "test_cifarnet.py"
    )
    assert "cifarnet -o tests/test_cifarnet.py --check" in generated.text  # as the user typed it
    healthy = (EXAMPLE / "model.py").read_text()
    selected = ["cifar_healthy", *(_plant(tmp_path, bug, healthy, generated) for bug in CIFAR_BUGS)]
    _assert_outcomes(_run_pytest(tmp_path, selected), ["cifar_healthy"], CIFAR_BUGS)
