"""Diagnostics through a real client: on open, change and save, for saved files,
unsaved buffers and notebooks, with the rule's docs on hover."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import Editor
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
        assert amp.severity == types.DiagnosticSeverity.Warning
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
