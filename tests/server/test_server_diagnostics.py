"""Diagnostics through a real client: on open, change and save, for saved files,
unsaved buffers and notebooks, with the rule's docs on hover."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp_editor import Editor
from lsprotocol import types

# TW401 (a deprecated AMP API, safe fix) and TW406 (torch.norm, safe fix).
BUGGY = """\
import torch

scaler = torch.cuda.amp.GradScaler()
x = torch.norm(torch.ones(2))
"""
CLEAN = """\
import torch

scaler = torch.amp.GradScaler("cuda")
x = torch.ones(2)
"""


def codes(diagnostics: list[types.Diagnostic]) -> list[object]:
    return sorted(str(d.code) for d in diagnostics)


def test_diagnostics_on_open_change_and_save(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "train.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        uri = editor.open("train.py")
        opened = await editor.diagnostics(uri, 1)
        assert codes(opened) == ["TW401", "TW406"]
        amp = next(d for d in opened if d.code == "TW401")
        assert amp.range == types.Range(
            start=types.Position(line=2, character=9), end=types.Position(line=2, character=36)
        )
        assert amp.severity == types.DiagnosticSeverity.Information
        assert amp.source == "torchwise"
        assert amp.message.endswith("(deprecated-amp-api)")
        assert amp.code_description is not None
        assert amp.code_description.href.endswith("/docs/rules/deprecated.md#tw401")
        assert list(amp.tags or ()) == [types.DiagnosticTag.Deprecated]

        version = editor.replace(uri, CLEAN)  # an unsaved change
        assert await editor.diagnostics(uri, version) == []
        version = editor.replace(uri, BUGGY)
        assert codes(await editor.diagnostics(uri, version)) == ["TW401", "TW406"]

        before = editor.publish_count(uri)
        editor.save(uri, "train.py")
        assert codes(await editor.next_publish(uri, before)) == ["TW401", "TW406"]

        before = editor.publish_count(uri)
        editor.close(uri)
        assert await editor.next_publish(uri, before) == []

    editor_session(scenario)


def test_hover_over_a_finding_shows_its_rule(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "train.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        uri = editor.open("train.py")
        await editor.diagnostics(uri, 1)
        document = types.TextDocumentIdentifier(uri=uri)
        over = await editor.client.text_document_hover_async(
            types.HoverParams(text_document=document, position=types.Position(line=2, character=20))
        )
        assert over is not None and isinstance(over.contents, types.MarkupContent)
        assert over.contents.kind == types.MarkupKind.Markdown
        assert over.contents.value.startswith("**TW401** `deprecated-amp-api` (info)")
        assert "#### What it does" in over.contents.value
        assert "deprecated.md#tw401" in over.contents.value
        assert over.range is not None and over.range.start.line == 2
        elsewhere = await editor.client.text_document_hover_async(
            types.HoverParams(text_document=document, position=types.Position(line=0, character=3))
        )
        assert elsewhere is None

    editor_session(scenario)


def test_an_unsaved_buffer_is_reviewed(tmp_path: Path, editor_session: Callable[..., Any]) -> None:
    async def scenario(editor: Editor) -> None:
        uri = editor.open("Untitled-1", BUGGY, uri="untitled:Untitled-1")
        assert codes(await editor.diagnostics(uri, 1)) == ["TW401", "TW406"]
        version = editor.replace(uri, "def broken(:\n")  # half typed
        (syntax,) = await editor.diagnostics(uri, version)
        assert syntax.code == "TW000" and syntax.severity == types.DiagnosticSeverity.Error
        version = editor.replace(uri, CLEAN)
        assert await editor.diagnostics(uri, version) == []

    editor_session(scenario)


def test_notebook_cells_get_their_own_diagnostics(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    cells = ["import torch\n%matplotlib inline\n", "x = 1\n", "y = torch.norm(torch.ones(2))\n"]

    async def scenario(editor: Editor) -> None:
        notebook = editor.open_notebook("analysis.ipynb", cells)
        third = await editor.next_publish(f"{notebook}#cell3", 0)
        assert codes(third) == ["TW406"]
        assert third[0].range.start == types.Position(line=0, character=4)
        assert await editor.next_publish(f"{notebook}#cell1", 0) == []

        before = editor.publish_count(f"{notebook}#cell3")
        editor.edit_cell(notebook, 3, "y = torch.ones(2)\n")
        assert await editor.next_publish(f"{notebook}#cell3", before) == []

    editor_session(scenario)
