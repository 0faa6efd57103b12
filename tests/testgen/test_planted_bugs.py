"""The generated tests pass on healthy models and fail on each planted bug doctor catches.

Tests are generated once for each healthy model (a small classifier, a
nanoGPT-style GPT, and the example project's CifarNet through its configured
name). Each planted bug then replaces the model file in a copy of its project,
next to the *same* generated test module, and one pytest run (a subprocess, as a
user runs it) executes every project. Healthy projects must pass; each bug must
make the test named for it fail.
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
from testgen_models import BUGS, GPT, NET

from torchwise.testgen import write_tests

ROOT = Path(__file__).parents[2]
GPT_INPUTS = "i64[batch=2,seq=16]<64, i64[batch=2,seq=16]<64"

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


def _outcomes(junit: Path) -> dict[str, dict[str, str]]:
    """project -> test id -> passed|failed|skipped|error."""
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for case in ET.parse(junit).getroot().iter("testcase"):
        project = case.get("classname", "").split(".")[0]
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
        found[project][case.get("name", "")] = outcome
    return found


@pytest.mark.slow
def test_generated_tests_pass_when_healthy_and_fail_on_each_planted_bug(tmp_path: Path) -> None:
    net = _project(tmp_path, "net_healthy", {"net.py": NET})
    gpt = _project(tmp_path, "gpt_healthy", {"gpt.py": GPT})
    cifar = tmp_path / "cifar_healthy"
    shutil.copytree(ROOT / "examples" / "cifar_project", cifar)
    generated = {
        "net": write_tests(
            str(net / "net.py:Net"),
            inputs=["f32[batch=8,12]"],
            output=net / "tests" / "test_net.py",
        ),
        "gpt": write_tests(
            str(gpt / "gpt.py"),
            build="GPT(GPTConfig())",
            inputs=[GPT_INPUTS],
            output=gpt / "tests" / "test_gpt.py",
        ),
        "cifar": write_tests(
            "cifarnet", config_start=cifar, output=cifar / "tests" / "test_cifarnet.py"
        ),
    }
    assert "causal-leak" in generated["gpt"].included_checks  # measured: the GPT is causal
    assert generated["gpt"].doctor_options["causal_dim"] == 1
    for bug in BUGS:
        healthy = {"net": NET, "gpt": GPT}[bug.source]
        project = _project(
            tmp_path, f"bug_{bug.name}".replace("-", "_"), {f"{bug.source}.py": bug.plant(healthy)}
        )
        test_file = f"test_{bug.source}.py"
        (project / "tests").mkdir()
        (project / "tests" / test_file).write_text(generated[bug.source].text)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    junit = tmp_path / "junit.xml"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            "-o",
            "addopts=",
            "--junitxml",
            str(junit),
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert junit.is_file(), run.stdout + run.stderr
    outcomes = _outcomes(junit)
    for project in ("net_healthy", "gpt_healthy", "cifar_healthy"):
        failed = [t for t, o in outcomes[project].items() if o not in ("passed", "skipped")]
        assert outcomes[project] and not failed, f"{project}: {failed}\n{run.stdout[-3000:]}"
    missed = []
    for bug in BUGS:
        project = f"bug_{bug.name}".replace("-", "_")
        failed = sorted(t for t, o in outcomes[project].items() if o == "failed")
        if bug.caught_by not in failed:
            missed.append(f"{bug.name}: expected {bug.caught_by} to fail; failed: {failed}")
    assert not missed, "\n".join(missed)
