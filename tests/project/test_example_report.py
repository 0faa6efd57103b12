"""``torchwise project`` on the example project: measures, doctor, review, nothing
written; its HTML report rendered in a real headless browser (Debian's chromium).

The example is audited once (a copy, so that nothing else touching ``examples/``
can disturb the no-write check) with two doctor checks to stay fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchwise.cli import app
from torchwise.project import AuditOptions, audit_project, render
from torchwise.project.schema import ProjectReport

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cifar_project"
CHECKS = "grad-flow,nan-inf"
#: Where the browser's screenshot is kept for people and CI to look at.
ARTIFACTS = Path(os.environ.get("TORCHWISE_TEST_ARTIFACTS", REPO / "build" / "test-artifacts"))
CHROMIUM = next(
    (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None
)
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


Example = tuple[Path, ProjectReport, dict[str, tuple[int, int]]]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with its size and mtime."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            stat = path.lstat()
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Example:
    root = tmp_path_factory.mktemp("example") / "cifar_project"
    shutil.copytree(EXAMPLE, root)
    before = snapshot(root)
    report = audit_project(root, AuditOptions(doctor=CHECKS))
    return root, report, before


@pytest.mark.slow
def test_the_audit_writes_nothing_into_the_project(example: Example) -> None:
    root, _, before = example
    assert snapshot(root) == before  # no __pycache__, no review cache, nothing touched


@pytest.mark.slow
def test_the_configured_model_is_measured_as_inspect_measures_it(example: Example) -> None:
    from torchwise.model import summarize
    from torchwise.target import resolve_target

    root, report, _ = example
    audit = next(m for m in report.models if m.name == "CifarNet")
    assert audit.error is None and audit.inputs == ["f32[batch=8,3,32,32]"]
    resolved = resolve_target("cifarnet", config_start=root)
    expected = summarize(resolved.model, resolved.args, resolved.kwargs)
    assert audit.measure is not None
    assert audit.measure.total_params == expected.total_params == 308_906
    assert audit.measure.flops_forward == expected.flops_forward
    assert audit.measure.outputs == [[8, 10]]
    assert {layer.name for layer in audit.measure.layers if layer.depth == 1} == {
        name for name, _ in resolved.model.named_children()
    }
    assert audit.command == "torchwise inspect cifarnet"


@pytest.mark.slow
def test_doctor_runs_the_selected_checks(example: Example) -> None:
    _, report, _ = example
    audit = next(m for m in report.models if m.name == "CifarNet")
    assert audit.doctor is not None
    assert [c.id for c in audit.doctor.checks] == CHECKS.split(",")
    assert audit.doctor.ok and all(c.status == "pass" for c in audit.doctor.checks)


@pytest.mark.slow
def test_review_and_notes(example: Example) -> None:
    from torchwise.review import ReviewSettings, review_paths

    root, report, _ = example
    expected = review_paths([root], ReviewSettings())
    assert report.review is not None
    assert sum(report.review.by_severity.values()) == len(expected.findings)
    assert report.review.by_family["training"]["error"] >= 2
    normalize = next(m for m in report.models if m.name == "Normalize")
    assert normalize.error == "no parameters: nothing to measure"
    assert set(report.timings) == {"knowledge", "review", "models", "run"}


@pytest.mark.slow
def test_the_training_command_runs_and_confirms_the_static_findings(example: Example) -> None:
    """The README's command ran a few steps in a copy of the project; what the review read
    and the run saw at the same place is one entry, confirmed, in the critical section."""
    _, report, _ = example
    run = report.run
    assert run is not None and run.error is None
    assert run.command == "python train.py --epochs 1" and run.source == "README.md:4"
    assert "3 optimizer steps" in run.ran
    assert any("ran in a copy of the project" in note for note in run.notes)
    sections = [entry.section for entry in report.merged]
    assert sections == sorted(sections, key=["critical", "performance", "practice",
                                             "positive", "tests"].index)  # fmt: skip
    by_sources = {tuple(e.sources): e for e in report.merged}
    zero_grad = by_sources[
        ("review TW101 missing-zero-grad", "run TWR101 gradients-accumulate-across-steps")
    ]
    assert zero_grad.confirmed and zero_grad.section == "critical"
    assert (zero_grad.path, zero_grad.line) == ("train.py", 27)
    assert "seen running python train.py --epochs 1" in zero_grad.evidence
    # each review finding appears once: alone, or in the entry the run confirmed
    assert report.review is not None
    review_sources = [s for e in report.merged for s in e.sources if s.startswith("review")]
    assert len(review_sources) == len(report.review.findings)
    assert sum(e.confirmed for e in report.merged) >= 4
    assert any(e.section == "positive" and "CifarNet" in e.title for e in report.merged)


@pytest.mark.slow
def test_cli_json_is_the_report(example: Example) -> None:
    root, _, _ = example
    result = CliRunner().invoke(
        app, ["project", str(root), "--format", "json", "--no-import", "--no-review"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    report = ProjectReport.model_validate(data)
    assert report.knowledge.configured_models == ["cifarnet"]
    assert report.review is None and report.models == []


def test_cli_refuses_a_file_as_the_project(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("")
    result = CliRunner().invoke(app, ["project", str(tmp_path / "x.py")])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "is not a directory" in result.stderr


def _chromium(*args: str, user_data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM or "chromium", *CHROMIUM_FLAGS, f"--user-data-dir={user_data}", *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless chromium is not installed, so the HTML report's rendering is not checked "
    "here (CI images may lack it; apt-get install -y chromium to run this check)",
)
@pytest.mark.slow
def test_the_html_report_renders_in_headless_chromium(example: Example, tmp_path: Path) -> None:
    _, report, _ = example
    page = tmp_path / "report.html"
    page.write_text(render(report, "html"), encoding="utf-8")
    url = page.as_uri()

    dom = _chromium("--dump-dom", url, user_data=tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for section in ("run", "critical", "knowledge", "modules", "review", "models", "notes"):
        assert f'<section id="{section}" data-section="{section}">' in dom.stdout
    assert "confirmed by running the code" in dom.stdout
    assert dom.stdout.count('<svg class="chart') >= 4  # findings, params, FLOPs, doctor
    assert "CifarNet" in dom.stdout and "TW101" in dom.stdout

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "project-report.png"
    shot.unlink(missing_ok=True)
    result = _chromium(
        f"--screenshot={shot}", "--window-size=1280,2400", url, user_data=tmp_path / "profile-shot"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # A blank or error page compresses to a few KiB; the rendered report, with its
    # tables and charts, to far more.
    assert len(data) > 60_000
