"""The project around a document: ``[tool.torchwise]`` (read as review reads it,
read again when it changes) and the open files that depend on a changed file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp_editor import Editor
from lsprotocol import types
from pygls import uris

BUGGY = """\
import torch

scaler = torch.cuda.amp.GradScaler()
x = torch.norm(torch.ones(2))
"""
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

torch.manual_seed(0)
model = Net()
criterion = nn.BCELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in [(torch.ones(2, 4), torch.ones(2, 1))]:
    opt.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    opt.step()
"""


def codes(diagnostics: list[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def watched(editor: Editor, path: Path, kind: types.FileChangeType) -> None:
    editor.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=str(uris.from_fs_path(str(path))), type=kind)]
        )
    )


def test_configuration_is_read_and_reread_when_it_changes(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.torchwise]\nignore = ["TW401"]\n')
    (tmp_path / "train.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        await editor.until(lambda: bool(editor.registrations))
        watchers = editor.registrations[0].register_options
        assert editor.registrations[0].method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
        assert watchers is not None and "**/pyproject.toml" in str(watchers)

        uri = editor.open("train.py")
        assert codes(await editor.diagnostics(uri, 1)) == ["TW406"]
        before = editor.publish_count(uri)
        pyproject.write_text('[tool.torchwise]\nignore = ["TW406"]\n')
        watched(editor, pyproject, types.FileChangeType.Changed)
        assert codes(await editor.next_publish(uri, before)) == ["TW401"]

    editor_session(scenario, watch=True)


def test_a_changed_configuration_is_seen_without_file_watching(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.torchwise]\nignore = ["TW401"]\n')
    (tmp_path / "a.py").write_text(BUGGY)
    (tmp_path / "b.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        a, b = editor.open("a.py"), editor.open("b.py")
        assert codes(await editor.diagnostics(a, 1)) == ["TW406"]
        assert codes(await editor.diagnostics(b, 1)) == ["TW406"]
        before = editor.publish_count(b)
        pyproject.write_text("[tool.torchwise]\n")
        version = editor.replace(a, BUGGY + "\n")
        assert codes(await editor.diagnostics(a, version)) == ["TW401", "TW406"]
        # b.py, unchanged, follows the configuration a.py found changed.
        assert codes(await editor.next_publish(b, before)) == ["TW401", "TW406"]

    editor_session(scenario)


def test_a_bad_configuration_is_shown_and_the_defaults_apply(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.torchwise]\nselectt = ["TW4"]\n')
    (tmp_path / "train.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        uri = editor.open("train.py")
        assert codes(await editor.diagnostics(uri, 1)) == ["TW401", "TW406"]
        await editor.until(lambda: bool(editor.messages))
        assert "unknown key 'selectt'" in editor.messages[0]

    editor_session(scenario)


def test_the_editor_can_narrow_the_rules(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "train.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        uri = editor.open("train.py")
        assert codes(await editor.diagnostics(uri, 1)) == ["TW401"]

    editor_session(scenario, options={"ignore": ["TW406"]})


def test_an_edit_to_a_module_reanalyses_the_open_files_that_import_it(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "other.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        train = editor.open("train.py")
        other = editor.open("other.py")
        models = editor.open("models.py")
        assert codes(await editor.diagnostics(train, 1)) == ["TW502"]  # BCELoss on a Sigmoid
        await editor.diagnostics(other, 1)
        await editor.diagnostics(models, 1)
        seen = {train: editor.publish_count(train), other: editor.publish_count(other)}

        # Unsaved: train.py sees the buffer of models.py, not the file on disk.
        version = editor.replace(models, MODELS.replace(", nn.Sigmoid()", ""))
        await editor.diagnostics(models, version)
        assert codes(await editor.next_publish(train, seen[train])) == []
        seen[train] = editor.publish_count(train)

        # An edit that changes nothing other files can see (a comment at the end;
        # lines moved would be seen) is not passed on; one that does is. Analyses
        # publish in order, so once train.py has its new findings, other.py would
        # have had its too.
        version = editor.replace(models, MODELS.replace(", nn.Sigmoid()", "") + "# a comment\n")
        await editor.diagnostics(models, version)
        version = editor.replace(models, MODELS)
        await editor.diagnostics(models, version)
        assert codes(await editor.next_publish(train, seen[train])) == ["TW502"]
        assert editor.publish_count(train) == seen[train] + 1
        assert editor.publish_count(other) == seen[other]

    editor_session(scenario)


def test_a_module_changed_on_disk_reanalyses_its_importers(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models.py").write_text(MODELS.replace(", nn.Sigmoid()", ""))
    (tmp_path / "pkg" / "train.py").write_text(TRAIN.replace("from models", "from .models"))

    async def scenario(editor: Editor) -> None:
        train = editor.open("pkg/train.py")
        assert codes(await editor.diagnostics(train, 1)) == []
        before = editor.publish_count(train)
        (tmp_path / "pkg" / "models.py").write_text(MODELS)  # a checkout, not the editor
        watched(editor, tmp_path / "pkg" / "models.py", types.FileChangeType.Changed)
        assert codes(await editor.next_publish(train, before)) == ["TW502"]

    editor_session(scenario, watch=True)


def test_excluded_files_and_other_languages_get_no_diagnostics(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.torchwise]\nexclude = ["legacy"]\n')
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old.py").write_text(BUGGY)
    (tmp_path / "notes.md").write_text("x = torch.norm(y)\n")
    (tmp_path / "new.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        old = editor.open("legacy/old.py")
        notes = editor.open("notes.md", language="markdown")
        new = editor.open("new.py")
        assert codes(await editor.diagnostics(new, 1)) == ["TW401", "TW406"]
        # Analyses run in the order they were asked for: old.py's came first.
        assert await editor.diagnostics(old, 1) == []
        assert editor.publish_count(notes) == 0

    editor_session(scenario)
