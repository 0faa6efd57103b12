"""``--format json|sarif|github|markdown``: schemas, escaping, and the written review."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from torchwise.review import ReviewSettings, all_rules, review_paths
from torchwise.review.output import render
from torchwise.review.output.github import annotation, escape_data, escape_property
from torchwise.review.output.sarif import sarif_document
from torchwise.review.runner import ReviewReport

SCHEMA = Path(__file__).parent.parent / "data" / "sarif-schema-2.1.0.json"

SOURCE = """\
import torch
from torch.autograd import Variable


def train(model, loader, optimizer):
    model.train()
    scaler = torch.cuda.amp.GradScaler()
    for x, y in loader:
        optimizer.zero_grad()
        loss = model(Variable(x)).sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    torch.manual_seed(0)
    return torch.load("model.pt", weights_only=True)
"""


def _notebook() -> str:
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    return json.dumps(
        {
            "cells": [
                {**cell, "source": ["import torch\n"]},
                {**cell, "source": ["!pip list\n", "s = torch.cuda.amp.GradScaler()\n"]},
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


@pytest.fixture
def report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ReviewReport:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(SOURCE)
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "nb.ipynb").write_text(_notebook())
    return review_paths(["."], ReviewSettings(select=("ALL",)), jobs=1)


def test_json_schema(report: ReviewReport) -> None:
    document = json.loads(render(report, "json"))
    assert document["schema_version"] == 1
    assert document["tool"]["name"] == "torchwise"
    summary = document["summary"]
    assert summary["files"] == 3
    assert summary["lines"] == report.lines
    assert summary["findings"] == len(document["findings"]) == len(report.findings)
    assert sum(summary["by_severity"].values()) == summary["findings"]
    assert set(summary["by_severity"]) == {"error", "warning", "info"}
    assert sum(summary["by_code"].values()) == summary["findings"]
    assert summary["fixable"]["safe"] >= 2
    keys = {
        "code", "name", "message", "severity", "path", "line", "column", "end_line",
        "end_column", "cell", "cell_line", "location", "fix", "data",
    }  # fmt: skip
    for finding in document["findings"]:
        assert set(finding) == keys
    amp = next(
        f for f in document["findings"] if f["path"] == "pkg/train.py" and f["code"] == "TW401"
    )
    assert amp["name"] == "deprecated-amp-api"
    assert amp["fix"]["applicability"] == "safe"
    assert SOURCE[amp["fix"]["edits"][0]["start"] :].startswith("torch.cuda.amp.GradScaler")
    notebook = next(f for f in document["findings"] if f["path"] == "nb.ipynb")
    assert notebook["location"] == "nb.ipynb:cell 2:2:5"


def test_sarif_validates_against_the_official_schema(report: ReviewReport) -> None:
    document = json.loads(render(report, "sarif"))
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(document)
    empty = json.loads(render(ReviewReport([]), "sarif"))
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(empty)


def test_sarif_rules_carry_docs_levels_and_security_severity() -> None:
    driver = sarif_document(ReviewReport([]))["runs"][0]["tool"]["driver"]  # type: ignore[index]
    descriptors = {rule["id"]: rule for rule in driver["rules"]}
    assert list(descriptors) == list(all_rules())
    levels = {"error": "error", "warning": "warning", "info": "note"}
    for code, info in all_rules().items():
        rule = descriptors[code]
        assert rule["name"] == info.name
        assert rule["shortDescription"]["text"] == info.summary
        assert "## Why is this bad?" in rule["help"]["markdown"] or code == "TW000"
        assert rule["helpUri"].endswith(f"docs/rules/{info.family}.md#{code.lower()}")
        assert rule["defaultConfiguration"]["level"] == levels[info.severity.value]
        properties = rule["properties"]
        if code.startswith("TW3"):
            assert "security" in properties["tags"]
            expected = {"error": "8.8", "warning": "5.5", "info": "3.0"}[info.severity.value]
            assert properties["security-severity"] == expected
        else:
            assert "security-severity" not in properties


def test_sarif_results_locations_and_fixes(report: ReviewReport) -> None:
    run = sarif_document(report)["runs"][0]  # type: ignore[index]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert len(results) == len(report.findings)
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    amp = next(
        r
        for r in results
        if r["ruleId"] == "TW401"
        and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/train.py"
    )
    physical = amp["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
    assert physical["region"] == {"startLine": 7, "startColumn": 14, "endLine": 7, "endColumn": 41}
    (change,) = amp["fixes"][0]["artifactChanges"]
    (replacement,) = [
        r for r in change["replacements"] if r["insertedContent"]["text"] == "torch.amp.GradScaler"
    ]
    offset = replacement["deletedRegion"]["charOffset"]
    length = replacement["deletedRegion"]["charLength"]
    assert SOURCE[offset : offset + length] == "torch.cuda.amp.GradScaler"
    notebook = next(
        r
        for r in results
        if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "nb.ipynb"
    )
    assert "region" not in notebook["locations"][0]["physicalLocation"]
    assert notebook["locations"][0]["logicalLocations"][0]["name"] == "cell 2"
    assert "fixes" not in notebook
    assert "(cell 2, line 2)" in notebook["message"]["text"]
    broken = next(r for r in results if r["ruleId"] == "TW000")
    assert broken["level"] == "error"


def test_github_annotations(report: ReviewReport) -> None:
    lines = render(report, "github").splitlines()
    assert len(lines) == len(report.findings)
    assert (
        "::notice file=pkg/train.py,line=7,col=14,endLine=7,endColumn=41,"
        "title=TW401 deprecated-amp-api::`torch.cuda.amp.GradScaler` is deprecated"
    ) in "\n".join(lines)
    assert any(line.startswith("::error file=broken.py,line=1,") for line in lines)
    notebook = next(line for line in lines if "file=nb.ipynb" in line)
    assert "line=" not in notebook.split("::")[1] and "::cell 2, line 2: " in notebook


def test_github_escaping() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    from torchwise.review import Finding, Severity

    finding = Finding("TW401", "bad: 100%\nreally", "dir,x/a:b.py", 1, 2, 1, 3, Severity.INFO)
    assert annotation(finding) == (
        "::notice file=dir%2Cx/a%3Ab.py,line=1,col=2,endLine=1,endColumn=3,"
        "title=TW401 deprecated-amp-api::bad: 100%25%0Areally"
    )


def test_markdown_is_a_written_review(report: ReviewReport) -> None:
    text = render(report, "markdown")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Critical issues",
        "## Likely bugs and traps",
        "## Performance",
        "## Deprecated and fragile code",
        "## What the code already does well",
        "## Testing recommendations",
    ]
    assert f"Reviewed **3 files** ({report.lines:,} lines)" in text
    # the syntax error is a critical issue, shown with its code
    critical = text.split("## Critical issues")[1].split("## Likely bugs")[0]
    assert "`TW000` syntax-error: `broken.py:1:" in critical
    assert ">1 | def f(:" in critical
    deprecated = text.split("## Deprecated and fragile code")[1].split("## What the code")[0]
    assert "`pkg/train.py:7:14`" in deprecated and "**Fix** (safe" in deprecated
    praise = text.split("## What the code already does well")[1].split("## Testing")[0]
    assert "`zero_grad()`" in praise and "`pkg/train.py:9`" in praise
    assert "weights_only=True" in praise and "seeded" in praise
    assert "`.train()`" in praise


def test_markdown_praise_is_withheld_when_a_finding_contradicts_it(tmp_path: Path) -> None:
    (tmp_path / "amp.py").write_text(
        "import torch\nwith torch.autocast('cuda'):\n    pass\ns = torch.cuda.amp.GradScaler()\n"
    )
    report = review_paths([tmp_path], ReviewSettings(), jobs=1)
    praise = render(report, "markdown").split("already does well")[1]
    assert "torch.amp" not in praise.split("## Testing")[0]


def test_markdown_with_no_findings(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    text = render(review_paths([tmp_path], ReviewSettings(), jobs=1), "markdown")
    assert "**0 findings**" in text
    assert "None: no finding is an almost-certain bug." in text


def _written(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return render(review_paths([tmp_path], ReviewSettings(), jobs=1), "markdown")


def test_markdown_one_entry_per_problem_with_all_its_places(tmp_path: Path) -> None:
    text = _written(
        tmp_path,
        {"amp.py": "import torch\n" + "s = torch.cuda.amp.GradScaler()\n" * 3},
    )
    assert text.count("### `TW401` deprecated-amp-api: 3 places") == 1
    assert text.count("**Why it matters.**") == 1
    for line in (2, 3, 4):
        assert f"amp.py:{line}:5`" in text


def test_markdown_orders_problems_by_impact(tmp_path: Path) -> None:
    text = _written(
        tmp_path,
        {
            "train.py": (
                "import torch\n"
                "from torch import nn\n"
                "state = torch.load('w.pt')\n"  # TW301: security
                "for x, y in loader:\n"
                "    loss = nn.functional.cross_entropy(model(x), y)\n"
                "    loss.backward()\n"
                "    optimizer.step()\n"  # TW101: results (error)
                "    print(loss.data[0])\n"  # TW130: crash (error)
            ),
        },
    )
    order = [text.index(f"`{code}`", text.index("## Critical")) for code in ("TW101", "TW130")]
    assert order == sorted(order)  # wrong results before a crash
    assert text.index("`TW301`", text.index("## Likely")) < text.index("## Performance")


def test_markdown_never_praises_a_flagged_line(tmp_path: Path) -> None:
    text = _written(
        tmp_path,
        {
            "loop.py": (
                "import torch\n"
                "for x in loader:\n"
                "    optimizer.zero_grad()\n"
                "    model(x).sum().backward()\n"
                "    optimizer.zero_grad()\n"  # TW102: zeroed before the step
                "    optimizer.step()\n"
            )
        },
    )
    praise = text.split("## What the code already does well")[1].split("## Testing")[0]
    assert "loop.py:5" not in praise


def test_markdown_recommends_the_projects_own_model(tmp_path: Path) -> None:
    model = (
        "import torch\nfrom torch import nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, channels):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(channels, 16, 3)\n"
        "        self.drop = nn.Dropout()\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.block = Block(3)\n"
        "        self.head = nn.Linear(16, 10)\n"
    )
    train = (
        "import torch\nfrom model import Net\n\n"
        "def evaluate(model, loader):\n"
        "    with torch.no_grad():\n"
        "        return [model(x) for x in loader]\n\n"
        "evaluate(Net(), [])\n"
    )
    text = _written(tmp_path, {"model.py": model, "train.py": train})
    testing = text.split("## Testing recommendations")[1]
    expected = (
        "model.py:Net --input 'f32[batch=8,3,32,32]' --checks eval-determinism,train-eval-gap"
    )
    assert expected in testing
    assert "<file.py>" not in testing and "Block" not in testing


def test_markdown_prefers_a_model_named_in_the_config(tmp_path: Path) -> None:
    from torchwise.review.output import RenderOptions

    (tmp_path / "loop.py").write_text(
        "for x in loader:\n    model(x).sum().backward()\n    optimizer.step()\n"
    )
    report = review_paths([tmp_path], ReviewSettings(), jobs=1)
    text = render(report, "markdown", RenderOptions(models=(("cifarnet", "model.py:CifarNet"),)))
    assert "torchwise doctor cifarnet --checks param-update,overfit-batch" in text


def test_every_recommended_doctor_check_exists() -> None:
    from torchwise.doctor.registry import CHECK_IDS
    from torchwise.review.output.markdown import CHECKS

    assert {check for _, ids, _ in CHECKS for check in ids} <= set(CHECK_IDS)
