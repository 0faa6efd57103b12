"""``torchwise run`` from the command line: the report, the exit codes, bad input.

One subprocess run (a script with a warning and an error) covers the CLI end to
end; the formats are checked on a report built in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from run_helpers import run_source

from torchwise.cli import app
from torchwise.findings import finding_from_dict
from torchwise.run import RunOptions
from torchwise.run.report import RunReport

SCHEMA = Path(__file__).parent.parent / "data" / "sarif-schema-2.1.0.json"

SCRIPT = """\
import sys

import torch
from torch import nn

print("epoch 0 starting")
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=float(sys.argv[2]))
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
for step in range(4):
    scheduler.step()
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
"""


def test_cli_run_end_to_end(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    report = tmp_path / "report.json"
    process = subprocess.run(
        [sys.executable, "-m", "torchwise", "run", str(script), "--steps", "3",
         "--format", "json", "-o", str(report), "--", "--lr", "0.1"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    assert process.returncode == 1, process.stderr
    assert process.stdout == ""  # the report went to -o, the script's print to stderr
    assert "epoch 0 starting" in process.stderr
    document = json.loads(report.read_text())
    assert document["run"]["steps"] == 4 and document["run"]["args"] == ["--lr", "0.1"]
    found = {(f["code"], f["line"], f["severity"]) for f in document["findings"]}
    assert found == {("TWR105", 11, "warning"), ("TWR101", 14, "error")}
    assert document["summary"]["by_severity"] == {"error": 1, "warning": 1, "info": 0}


def _report(tmp_path: Path) -> RunReport:
    result = run_source(tmp_path, SCRIPT.replace("float(sys.argv[2])", "0.1"), name="train.py")
    return RunReport(
        target="train.py",
        args=(),
        options=RunOptions(),
        findings=[finding_from_dict(f) for f in result["findings"]],
        ranks=[result],
    )


def test_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = _report(tmp_path)
    assert report.exit_code == 1
    text = report.render("text")
    assert text.startswith("Ran train.py: 4 optimizer steps")
    assert "train.py:14:5: TWR101 gradients accumulate across optimizer steps" in text
    assert "Found 2 problems (1 error, 1 warning) in train.py." in text
    sarif = json.loads(report.render("sarif"))
    jsonschema.validate(sarif, json.loads(SCHEMA.read_text()))
    results = sarif["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"TWR101", "TWR105"}
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"
    github = report.render("github").splitlines()
    assert any(line.startswith("::error file=train.py,line=14,") for line in github)
    assert any("title=TWR105 scheduler-before-optimizer" in line for line in github)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "missing.py does not exist"),
        (["notes.txt"], "is not a Python script"),
        ([], "give a script to run"),
        (["train.py", "--lr", "0.1"], "no such option"),
        (["-m", "not a module"], "is not a module name"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (killed, not yet reaped by an init that never
    reaps, as in some containers) is dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_terminated_run_takes_the_running_script_with_it(tmp_path: Path) -> None:
    """``timeout 900 torchwise run ...`` sends SIGTERM: the script, in a session of
    its own, must not run on orphaned."""
    import os
    import signal
    import time

    marker = tmp_path / "pid"
    script = tmp_path / "hang.py"
    script.write_text(
        "import os, time\n"
        f"open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "while True:\n"
        "    time.sleep(0.05)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-m", "torchwise", "run", str(script), "--cpu", "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(1200):  # the script has started (bounded: a broken run fails here)
            if marker.exists() and marker.read_text():
                break
            time.sleep(0.1)
        child = int(marker.read_text())
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=120)
        for _ in range(600):
            if not _alive(child):
                break
            time.sleep(0.1)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("the script kept running after torchwise run was terminated")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_script_that_does_not_parse_is_reported_at_pythons_place_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchwise.run import run_script

    script = tmp_path / "train.py"
    script.write_text("import torch\n\nprint 'epoch', 1\n")
    (finding,) = run_script(script).findings
    assert (finding.code, finding.line, Path(finding.path).name) == ("TWR001", 3, "train.py")
    assert "does not parse: SyntaxError" in finding.message
    package = tmp_path / "graphsage"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("def f():\n    print 'loss'\n")
    monkeypatch.chdir(tmp_path)  # python -m looks in the working directory first
    (finding,) = run_script(None, module="graphsage.model").findings
    assert (finding.line, Path(finding.path).name) == (2, "model.py")
