"""tune() end to end on tiny models: what it leaves alone, what it reports, in every format."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from html.parser import HTMLParser
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch
from conftest import TinyCNN, TinyMLP

from torchwise.errors import TorchwiseError
from torchwise.tune import SessionConfig, TuneReport, api, tune
from torchwise.tune.api import _after_scan
from torchwise.tune.batch_size import BatchSizeResult, SizeRun
from torchwise.tune.lr_range import LRResult, analyse_curve
from torchwise.tune.search import Search, SearchResult
from torchwise.tune.session import ArmResult, SessionResult

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "loader_data.py"
QUICK = SessionConfig(warmup_steps=2, min_rounds=8, max_rounds=12, budget_s=2.0)


def documented_schema() -> dict[str, object]:
    text = (REPO / "docs" / "tune.md").read_text()
    block = re.search(r"```json\n(\{\n  \"\$schema\".*?)\n```", text, re.S)
    assert block is not None, "docs/tune.md lost its JSON schema"
    schema: dict[str, object] = json.loads(block.group(1))
    return schema


@pytest.fixture(scope="module")
def cnn_report() -> TuneReport:
    torch.manual_seed(0)
    report = tune(
        TinyCNN(),
        torch.randn(4, 3, 8, 8),
        budget_s=3,
        session=QUICK,
        knobs=["channels-last", "fused-optimizer", "zero-grad-in-place"],
    )
    # The finders run for real in test_finders.py; here their results only need rendering.
    lrs = [1e-6 * 10 ** (i / 10) for i in range(60)]
    losses = [2.0 - 1.5 / (1 + math.exp(-3 * (math.log10(lr) + 3))) for lr in lrs]
    report.lr = LRResult(lrs, losses, analyse_curve(lrs, losses), "one fixed synthetic batch", None)
    probes = [SizeRun(s, True, 8, 1000 * s + 4000, 1e-4 * s**0.8) for s in (4, 8, 16)]
    report.batch_size = BatchSizeResult(
        4,
        2**20,
        "--memory-budget",
        0.2,
        16,
        probes,
        [SizeRun(16, True, 10, 20_000, 1e-3)],
        16,
        "verified",
    )
    return report


@pytest.mark.slow
def test_tune_leaves_the_model_rng_and_threads_alone() -> None:
    torch.manual_seed(1)
    model = TinyCNN()
    x = torch.randn(4, 3, 8, 8)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch_rng, np_rng, py_rng = (
        torch.get_rng_state(),
        np.random.get_state()[1].copy(),
        random.getstate(),
    )
    threads = torch.get_num_threads()
    tune(model, x, budget_s=1, session=QUICK, knobs=["threads-1", "channels-last"], profile=False)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert model.training
    assert torch.equal(torch.get_rng_state(), torch_rng)
    assert np.array_equal(np.random.get_state()[1], np_rng) and random.getstate() == py_rng
    assert torch.get_num_threads() == threads
    assert torch.equal(x, x.clone())


@pytest.mark.slow
def test_the_json_matches_the_documented_schema(cnn_report: TuneReport) -> None:
    data = json.loads(cnn_report.render("json"))
    jsonschema.validate(data, documented_schema())
    assert data["workload"]["batch_size"] == 4
    statuses = {t["knob"]: t["status"] for t in data["trials"]}
    assert set(statuses) == {"channels-last", "fused-optimizer", "zero-grad-in-place"}
    assert data["batch_size"]["pick"] == 16 and data["lr"]["confidence"] != "none"
    assert data["baseline"]["phases_s"]["forward"] > 0


@pytest.mark.slow
def test_every_format_renders(cnn_report: TuneReport) -> None:
    text = cnn_report.render("text")
    assert text.startswith("torchwise tune: TinyCNN on cpu")
    for heading in ("Baseline", "Method", "Batch size", "Learning rate"):
        assert heading in text
    markdown = cnn_report.render("markdown")
    assert markdown.startswith("# torchwise tune: TinyCNN") and "## Method" in markdown
    with pytest.raises(ValueError, match="unknown format"):
        cnn_report.render("yaml")


@pytest.mark.slow
def test_a_combination_the_budget_left_unmeasured_is_reported_so(cnn_report: TuneReport) -> None:
    measured = [
        dataclasses.replace(t, accepted=True) for t in cnn_report.trials if t.comparison is not None
    ][:2]
    assert len(measured) == 2
    why = "its first look would take about 4.2 s (11 rounds), more than the 0.5 s of budget it had"
    unrun = SessionResult(
        ArmResult("baseline"), {"combined": ArmResult("combined")}, 0, 0.1, why, QUICK
    )
    search = dataclasses.replace(cnn_report.search, accepted=measured, confirmation=unrun)
    report = dataclasses.replace(cnn_report, search=search)
    expected = f"Together: not measured against the baseline: {why}. Each gain above"
    assert expected in report.render("text")
    assert "All together: not measured" not in report.render("text")
    # Markdown: a plain sentence, not a heading; HTML: a note, not the green result style.
    assert f"\n{expected}" in report.render("markdown")
    assert "### All together: not" not in report.render("markdown")
    page = report.render("html")
    assert 'Together: <span class="unmeasured">not measured against the baseline' in page
    assert '<span class="gain">not measured' not in page
    data = json.loads(report.render("json"))
    jsonschema.validate(data, documented_schema())
    assert data["combined"]["comparison"] is None and data["combined"]["not_measured"] == why


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith("#"):
                self.external.append(value)


@pytest.mark.slow
def test_the_html_page_is_self_contained(cnn_report: TuneReport) -> None:
    page = cnn_report.render("html")
    parser = _Collector()
    parser.feed(page)
    assert parser.external == []
    assert "script" not in parser.tags and "link" not in parser.tags
    assert parser.tags.count("svg") >= 3  # step times, batch size (2), lr curve
    assert "<style>" in page and page.rstrip().endswith("</html>")


def test_recommendations_come_with_a_diff_and_evidence() -> None:
    # A stage-1 acceptance is forced by a knob list that cannot lose against a
    # sabotaged baseline? No: verdicts are measured. Build a report and check
    # the structure of whatever was accepted.
    torch.manual_seed(0)
    report = tune(
        TinyMLP(),
        torch.randn(8, 16),
        budget_s=2,
        session=QUICK,
        profile=False,
        knobs=["threads-1", "foreach-optimizer"],
    )
    data = report.to_dict()
    for rec, diff in zip(data["recommendations"], report.recommendation_diffs(), strict=True):
        assert rec["diff"] == diff and diff.startswith("--- a/pattern.py")
        assert rec["comparison"]["verdict"] == "faster"
        assert rec["check"]["ok"]


def tune_on_the_test_loader() -> TuneReport:
    """A quick tune of the tiny MLP fed by tests/tune/loader_data.py's loader."""
    return tune(
        TinyMLP(),
        None,
        loader=f"{DATA}:make_loader",
        budget_s=2,
        session=QUICK,
        knobs=["foreach-optimizer"],
    )


@pytest.mark.slow
def test_a_loader_workload_reports_the_loader() -> None:
    report = tune_on_the_test_loader()
    data = report.to_dict()
    assert data["workload"]["loader"].endswith("loader_data.py:make_loader")
    assert data["loader"]["user"] == {"num_workers": 0, "pin_memory": False}
    assert data["loader"]["input_bound"] is not None
    assert "DataLoader" in report.render("text")


def test_the_loader_scan_counts_against_the_budget() -> None:
    # The search gets what the scan left of --budget, and at least half of it.
    assert _after_scan(60.0, 12.5) == 47.5
    assert _after_scan(60.0, 45.0) == 30.0


@pytest.mark.slow
def test_the_search_runs_on_what_the_loader_scan_left(monkeypatch: pytest.MonkeyPatch) -> None:
    budgets: list[float] = []
    scans: list[tuple[float, float]] = []

    def after_scan(budget_s: float, scan_s: float) -> float:
        scans.append((budget_s, scan_s))
        return 1.25

    class Recording(Search):
        def run(self) -> SearchResult:
            budgets.append(self.config.budget_s)
            return super().run()

    monkeypatch.setattr(api, "_after_scan", after_scan)
    monkeypatch.setattr(api, "Search", Recording)
    tune_on_the_test_loader()
    assert budgets == [1.25]
    assert len(scans) == 1 and scans[0][0] == 2 and scans[0][1] > 0


@pytest.mark.slow
def test_labels_from_a_dict_loader_drive_the_loss() -> None:
    class KwargsMLP(TinyMLP):
        def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            return super().forward(x)

    report = tune(
        KwargsMLP(),
        None,
        loader=f"{DATA}:make_dict_loader",
        budget_s=1,
        session=QUICK,
        knobs=["zero-grad-in-place"],
        profile=False,
    )
    assert "for batch, target in loader:" in report.canonical.render()
    assert "model(**batch)" in report.canonical.render()


def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(TorchwiseError, match="CUDA is not available"):
        tune(TinyMLP(), torch.randn(8, 16), device="cuda")


def test_a_forward_that_raises_names_the_users_line() -> None:
    class Broken(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ torch.ones(3, 3)  # wrong shape on purpose

    with pytest.raises(TorchwiseError, match=r"forward of Broken raised at .*test_api.py:\d+"):
        tune(Broken(), torch.randn(2, 4))
