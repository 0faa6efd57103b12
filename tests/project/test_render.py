"""The report's formats, from a report built here (no model is run)."""

from __future__ import annotations

import json
import re

import pytest

from torchwise.project import render
from torchwise.project.render import charts
from torchwise.project.schema import (
    BuildPlan,
    CheckpointEntry,
    CheckpointFinding,
    DoctorCheck,
    DoctorSummary,
    FindingRow,
    LayerRow,
    ModelAudit,
    ModelMeasure,
    ModuleClass,
    Package,
    ProjectCommand,
    ProjectKnowledge,
    ProjectReport,
    ReviewSummary,
    Trigger,
)


def report() -> ProjectReport:
    knowledge = ProjectKnowledge(
        root="/p",
        name="demo",
        is_pytorch=True,
        triggers=[Trigger(kind="import", path="net.py", line=1, detail="import torch")],
        stack=[Package(name="torch", role="framework", declared=">=2.1", installed="2.13.0")],
        commands=[ProjectCommand(purpose="train", command="python train.py", source="README.md:3")],
        modules=[
            ModuleClass(
                name="Net",
                path="net.py",
                line=4,
                bases=["torch.nn.Module"],
                top_level=True,
                build=BuildPlan(how="default", target="net.py:Net"),
            ),
            ModuleClass(
                name="Block",
                path="net.py",
                line=1,
                bases=["torch.nn.Module"],
                top_level=False,
                build=BuildPlan(
                    how="needs-arguments", required=["dim"], reason="__init__ needs dim"
                ),
            ),
        ],
    )
    finding = FindingRow(
        code="TW101",
        rule="missing-zero-grad",
        family="training",
        severity="error",
        path="train.py",
        line=9,
        column=5,
        message="grads <script>alert(1)</script> accumulate",
    )
    review = ReviewSummary(
        files=2,
        lines=40,
        by_severity={"error": 1, "warning": 0, "info": 0},
        by_family={"training": {"error": 1, "warning": 0, "info": 0}},
        fixable=0,
        findings=[finding],
    )
    layers = [
        LayerRow(
            name=f"layer{i}",
            type="Linear",
            depth=1,
            params=10 * i,
            flops=100 * i,
            output_shapes=[[2, 4]],
        )
        for i in range(1, 21)
    ]
    measure = ModelMeasure(
        name="Net",
        inputs=[[2, 8]],
        outputs=[[2, 4]],
        output_dtypes=["float32"],
        total_params=2100,
        trainable_params=2100,
        param_bytes=8400,
        flops_forward=21000,
        macs_forward=10500,
        flops_training=63000,
        peak_activation_bytes=4096,
        training_memory_bytes=40000,
        device="meta",
        unsupported_ops={},
        layers=layers,
    )
    doctor = DoctorSummary(
        target="Net",
        inputs=["f32[2,8]"],
        loss="mse",
        ok=False,
        counts={"pass": 1, "warn": 1, "fail": 1, "skip": 0},
        checks=[
            DoctorCheck(
                id="grad-flow", status="fail", summary="layer3 gets no gradient", fix="use it"
            ),
            DoctorCheck(id="dead-units", status="warn", summary="40% dead"),
            DoctorCheck(id="nan-inf", status="pass", summary="finite"),
        ],
        seconds=1.0,
    )
    return ProjectReport(
        torchwise_version="0.0",
        knowledge=knowledge,
        review=review,
        checkpoints=[
            CheckpointEntry(
                path="ok.pt",
                size_bytes=2048,
                format="zip",
                verdict="safe",
                kind="state_dict",
                tensors=3,
                parameters=2100,
                tensor_bytes=8400,
            ),
            CheckpointEntry(
                path="evil.pt",
                size_bytes=100,
                format="pickle",
                verdict="unsafe",
                findings=[
                    CheckpointFinding(
                        severity="dangerous",
                        rule="dangerous-global",
                        reason="calls os.system",
                        call="posix.system('x')",
                    )
                ],
            ),
        ],
        models=[
            ModelAudit(
                name="Net",
                path="net.py",
                target="net.py:Net",
                inputs=["f32[batch=2,8]"],
                inputs_source="inferred",
                command="torchwise inspect net.py:Net",
                measure=measure,
                doctor=doctor,
            ),
            ModelAudit(name="Other", path="o.py", target="o.py:Other", error="could not infer"),
        ],
        timings={"knowledge": 0.5, "review": 0.1},
        notes=["a note"],
    )


def test_json_round_trips_through_the_schema() -> None:
    original = report()
    data = json.loads(render(original, "json"))
    assert data["schema_version"] == 2
    assert ProjectReport.model_validate(data) == original


def test_text_says_what_matters() -> None:
    text = render(report(), "text")
    assert "torchwise project: demo" in text
    assert "error   train.py:9:5 TW101" in text
    assert "UNSAFE   evil.pt" in text and "calls os.system" in text
    assert "2.1 k params" in text and "1 failed, 1 warned, 1 passed (FAIL: grad-flow)" in text
    assert "could not infer" in text
    # a plan read from the code is not stated as a recipe until the audit tried it
    assert re.search(r"Net +model +not tried: would build with default constructor  net.py:4", text)


def test_a_build_recipe_is_stated_only_once_it_worked() -> None:
    from torchwise.project.render.common import plan_text
    from torchwise.project.schema import BuildPlan

    built = BuildPlan(how="default", target="m.py:Net", status="built", inputs=["f32[4,8]"])
    assert plan_text(built) == "built with default constructor, fed f32[4,8]"
    failed = BuildPlan(
        how="default", status="failed", error="raised", needs="torchvision, which is not installed"
    )
    assert plan_text(failed) == "needs torchvision, which is not installed"
    untried = BuildPlan(how="config-class", build="GPT(GPTConfig())")
    assert plan_text(untried) == "not tried: would build with GPT(GPTConfig())"


def test_markdown_has_its_sections() -> None:
    markdown = render(report(), "markdown")
    for heading in (
        "# torchwise project: `demo`",
        "## Project knowledge",
        "### Commands",
        "### Models",
        "## Review",
        "## Checkpoints",
        "## Models measured",
        "## Notes",
    ):
        assert heading in markdown
    assert "| error | `train.py:9` | TW101 missing-zero-grad |" in markdown
    assert "- train: `python train.py` (README.md:3)" in markdown


@pytest.fixture(scope="module")
def page() -> str:
    return render(report(), "html")


def test_html_is_self_contained(page: str) -> None:
    assert "<script" not in page.replace("&lt;script", "")  # the finding's text is escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page


def test_html_has_every_section_and_chart(page: str) -> None:
    for section in ("knowledge", "modules", "review", "models", "checkpoints", "notes"):
        assert f'<section id="{section}" data-section="{section}">' in page
    assert page.count('<svg class="chart') == 5  # findings, params, FLOPs, doctor, verdicts
    assert "review findings by family and severity" in page
    assert "5 other layers" in page  # 20 layers: 15 bars and the rest summed


def test_bars_scale_linearly_and_never_hide_a_nonzero_value() -> None:
    svg = charts.bars([("big", 1000, "1 k"), ("tiny", 1, "1"), ("zero", 0, "0")], "t")
    widths = [float(w) for w in re.findall(r'<rect x="190" y="\d+" width="([\d.]+)"', svg)]
    assert widths[0] == pytest.approx(640 - 190 - 90)
    assert widths[1] == 1.0 and widths[2] == 0.0
