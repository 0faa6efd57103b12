"""An editor session's workspace: unsaved buffers seen by the files that import
them, summaries made again only when a file's text changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchwise.review import ReviewSettings, Workspace, project_imports, review_text
from torchwise.review import workspace as workspace_module

MODELS = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())

    def forward(self, x):
        return self.head(x)
"""
TRAIN = """\
import torch
import torch.nn as nn

from models import Net

model = Net()
criterion = nn.BCELoss()
loss = criterion(model(torch.ones(2, 4)), torch.ones(2, 1))
"""


def codes(text: str, path: Path, workspace: Workspace | None = None) -> list[str]:
    settings = ReviewSettings(select=("TW502",))
    report = review_text(text, str(path), settings, workspace=workspace)
    return [finding.code for finding in report.findings]


def test_an_unsaved_buffer_is_what_importers_see(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    train = tmp_path / "train.py"
    workspace = Workspace()
    assert codes(TRAIN, train, workspace) == ["TW502"]  # BCELoss after the model's Sigmoid
    changed = workspace.set_buffer(
        str(tmp_path / "models.py"), MODELS.replace(", nn.Sigmoid()", "")
    )
    assert changed
    assert codes(TRAIN, train, workspace) == []
    workspace.drop_buffer(str(tmp_path / "models.py"))
    assert codes(TRAIN, train, workspace) == ["TW502"]
    assert codes(TRAIN, train) == ["TW502"]  # without a workspace: the disk


def test_summaries_are_made_again_only_when_the_text_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    made: list[str] = []
    summarize = workspace_module.summarize_tree

    def counting(tree: object, source: str, path: str) -> object:
        made.append(Path(path).name)
        return summarize(tree, source, path)  # type: ignore[arg-type]

    monkeypatch.setattr(workspace_module, "summarize_tree", counting)
    workspace = Workspace()
    for _ in range(3):
        assert codes(TRAIN, tmp_path / "train.py", workspace) == ["TW502"]
    assert sorted(made) == ["models.py", "train.py"]  # once each, not once a review
    assert not workspace.set_buffer(str(tmp_path / "models.py"), MODELS + "# end\n")
    assert workspace.set_buffer(str(tmp_path / "models.py"), "\n" + MODELS)  # lines moved


def test_project_imports_resolve_as_a_review_does(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text(TRAIN)
    assert project_imports(str(tmp_path / "train.py")) == [str(tmp_path / "models.py")]
    assert project_imports(str(tmp_path / "train.py"), "import torch\n") == []
    workspace = Workspace()
    workspace.set_buffer(str(tmp_path / "scratch.py"), "import models\n")
    assert workspace.imports(str(tmp_path / "scratch.py")) == [str(tmp_path / "models.py")]
