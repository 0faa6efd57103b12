"""``audit_project`` on a project of broken, hanging and crashing models: inputs
inferred, user-code failures recorded, the audit always finishes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchwise.project import AuditOptions, audit_project
from torchwise.project.schema import ModelAudit, ProjectReport

PROJECT = {
    "vision.py": """
        import torch.nn as nn

        class Classifier(nn.Module):
            def __init__(self, classes: int = 10):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                self.pool = nn.AdaptiveAvgPool2d(1)
                self.fc = nn.Linear(8, classes)

            def forward(self, images):
                return self.fc(self.pool(self.conv(images)).flatten(1))
    """,
    "lm.py": """
        from dataclasses import dataclass
        import torch.nn as nn

        @dataclass
        class LMConfig:
            vocab: int = 100
            dim: int = 16

        class TinyLM(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.embed = nn.Embedding(config.vocab, config.dim)
                self.head = nn.Linear(config.dim, config.vocab)

            def forward(self, ids):
                return self.head(self.embed(ids))

        def tiny_lm():
            return TinyLM(LMConfig())
    """,
    "broken.py": """
        import torch.nn as nn

        class Broken(nn.Module):
            def __init__(self):
                super().__init__()
                raise ValueError("no weights for this size")
    """,
    "traindies.py": """
        import os
        import torch.nn as nn

        class TrainDies(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                # Only a real training step crashes; inspect runs on the meta device.
                if self.training and x.device.type != "meta":
                    os._exit(5)
                return self.fc(x)
    """,
    "evaldies.py": """
        import os
        import torch
        import torch.nn as nn

        class EvalDies(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                # Only an eval forward with gradients crashes: doctor's batch-independence,
                # after grad-flow (train mode); input inference runs under no_grad.
                if not self.training and torch.is_grad_enabled() and x.device.type != "meta":
                    os._exit(6)
                return self.fc(x)
    """,
    "dies.py": """
        import os
        import torch.nn as nn

        class Dies(nn.Module):
            def __init__(self):
                super().__init__()
                os._exit(3)
    """,
    "script.py": """
        import torch.nn as nn
        from pathlib import Path

        class Scripted(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

        for step in range(1):
            Path("IMPORTED").write_text("the script ran")
    """,
}


@pytest.fixture(scope="module")
def messy(tmp_path_factory: pytest.TempPathFactory) -> Messy:
    root = tmp_path_factory.mktemp("messy")
    for name, text in PROJECT.items():
        (root / name).write_text(textwrap.dedent(text).lstrip())
    # A limit no model here needs, however loaded the machine: none of them hangs.
    options = AuditOptions(doctor="grad-flow,batch-independence", review=False, model_timeout=900)
    return root, audit_project(root, options)


HANG = """
        import torch.nn as nn

        class Hang(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                while True:
                    pass
    """

Messy = tuple[Path, ProjectReport]


def audits(report: ProjectReport) -> dict[str, ModelAudit]:
    return {m.name: m for m in report.models}


@pytest.mark.slow
def test_inputs_are_inferred_from_the_first_layer(messy: Messy) -> None:
    _, report = messy
    models = audits(report)
    classifier = models["Classifier"]
    assert classifier.inputs == ["f32[batch=4,3,32,32]"]
    assert classifier.inputs_source == "inferred"
    assert classifier.measure is not None and classifier.measure.outputs == [[4, 10]]
    assert "--input 'f32[batch=4,3,32,32]'" in classifier.command
    lm = models["TinyLM"]
    assert lm.inputs == ["i64[batch=4,seq=16]<100"]
    # 100*16 embedding + 16*100 + 100 head
    assert lm.measure is not None
    assert lm.measure.total_params == 100 * 16 + 16 * 100 + 100
    assert lm.doctor is not None
    assert [c.id for c in lm.doctor.checks] == ["grad-flow", "batch-independence"]


@pytest.mark.slow
def test_user_code_failures_are_recorded_and_the_audit_goes_on(messy: Messy) -> None:
    _, report = messy
    models = audits(report)
    assert "ValueError: no weights for this size" in str(models["Broken"].error)
    assert "died without a result (exit code 3)" in str(models["Dies"].error)


@pytest.mark.slow
def test_the_knowledge_states_a_recipe_only_when_the_build_worked(messy: Messy) -> None:
    _, report = messy
    plans = {m.name: m.build for m in report.knowledge.modules}
    assert plans["Classifier"].status == "built"
    assert plans["Classifier"].inputs == ["f32[batch=4,3,32,32]"]
    broken = plans["Broken"]
    assert broken.status == "failed" and "no weights for this size" in str(broken.error)
    assert broken.needs is not None and "[tool.torchwise.models.broken]" in broken.needs
    assert plans["Scripted"].status == "untried"  # never imported: its file runs code
    from torchwise.project import knowledge_markdown

    markdown = knowledge_markdown(report.knowledge)
    assert "built with default constructor, fed `f32[batch=4,3,32,32]`" in markdown
    assert "| `Broken` |" in markdown and "needs a build that works" in markdown


@pytest.mark.slow
def test_a_model_that_crashes_in_doctor_keeps_its_measures(messy: Messy) -> None:
    _, report = messy
    crashed = audits(report)["TrainDies"]
    assert "died without a result (exit code 5)" in str(crashed.error)
    assert crashed.measure is not None and crashed.measure.total_params == 4 * 4 + 4
    assert crashed.doctor is None


@pytest.mark.slow
def test_doctor_checks_that_finished_before_a_crash_are_kept(messy: Messy) -> None:
    _, report = messy
    crashed = audits(report)["EvalDies"]
    assert "died without a result (exit code 6)" in str(crashed.error)
    assert crashed.doctor is not None
    assert [(c.id, c.status) for c in crashed.doctor.checks] == [("grad-flow", "pass")]


@pytest.mark.slow
def test_a_hanging_model_is_stopped_at_the_time_limit(tmp_path: Path) -> None:
    (tmp_path / "hang.py").write_text(textwrap.dedent(HANG).lstrip())
    # The forward never returns, so the limit is reached whatever the machine's speed.
    report = audit_project(tmp_path, AuditOptions(doctor="off", review=False, model_timeout=10))
    (hang,) = report.models
    # What it was doing when stopped depends on the machine's speed (building or inferring).
    assert str(hang.error).startswith(
        "building and checking Hang took longer than 10s and was stopped during "
    )


@pytest.mark.slow
def test_a_file_that_runs_code_at_import_is_not_imported(messy: Messy) -> None:
    root, report = messy
    assert "Scripted" not in audits(report)
    assert any("Scripted not built" in note and "for block" in note for note in report.notes)
    assert not (root / "IMPORTED").exists()


def test_no_import_is_a_static_audit(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import torch\nclass M(torch.nn.Module):\n    pass\nopen('RAN', 'w')\n"
    )
    report = audit_project(tmp_path, AuditOptions(import_models=False))
    assert report.models == [] and not (tmp_path / "RAN").exists()
    assert report.review is not None
    assert "static audit only" in report.notes[-1]
