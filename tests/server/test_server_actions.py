"""Code actions through a real client: a finding's fix, ``# noqa``, "fix all";
each applied as the editor would, and the result must parse and be clean."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsp_editor import Editor
from lsprotocol import types

from torchwise.server.positions import LineIndex

BUGGY = """\
import torch

scaler = torch.cuda.amp.GradScaler()
x = torch.norm(torch.ones(2))
"""


def apply(text: str, edits: Sequence[types.TextEdit]) -> str:
    """Apply LSP text edits as an editor does (all against the original text)."""
    index = LineIndex(text)
    spans = sorted(
        ((index.offset(e.range.start), index.offset(e.range.end), e.new_text) for e in edits),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def edits_for(action: types.CodeAction, uri: str) -> list[types.TextEdit]:
    assert action.edit is not None and action.edit.changes is not None
    return list(action.edit.changes[uri])


async def actions_at(
    editor: Editor, uri: str, line: int, only: list[str] | None = None, named: bool = True
) -> list[types.CodeAction]:
    """The actions offered for the cursor at the start of ``line``; with ``named``, the
    request names the diagnostics shown on that line, as VS Code's does."""
    diagnostics = await editor.diagnostics(uri) if named else []
    here = types.Range(
        start=types.Position(line=line, character=0), end=types.Position(line=line, character=1)
    )
    found = await editor.client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=here,
            context=types.CodeActionContext(
                diagnostics=[d for d in diagnostics if d.range.start.line == line], only=only
            ),
        )
    )
    assert found is not None
    return [action for action in found if isinstance(action, types.CodeAction)]


def test_a_safe_fix_applied_leaves_valid_clean_code(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "train.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        uri = editor.open("train.py")
        offered = await actions_at(editor, uri, 2)
        titles = [action.title for action in offered]
        assert titles[:2] == [
            "Use `torch.amp.GradScaler` (TW401)",
            "Disable TW401 for this line (# noqa: TW401)",
        ]
        # Neovim names no diagnostic: the cursor's line is enough.
        assert [a.title for a in await actions_at(editor, uri, 2, named=False)] == titles
        fix = offered[0]
        assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
        assert fix.diagnostics and fix.diagnostics[0].code == "TW401"
        fixed = apply(editor.text(uri), edits_for(fix, uri))
        ast.parse(fixed)
        assert 'torch.amp.GradScaler("cuda")' in fixed
        version = editor.replace(uri, fixed)
        assert [d.code for d in await editor.diagnostics(uri, version)] == ["TW406"]

    editor_session(scenario)


def test_noqa_silences_the_finding(tmp_path: Path, editor_session: Callable[..., Any]) -> None:
    (tmp_path / "train.py").write_text(BUGGY.replace("()\n", "()  # noqa: TW406\n"))

    async def scenario(editor: Editor) -> None:
        uri = editor.open("train.py")
        noqa = next(a for a in await actions_at(editor, uri, 2) if "noqa" in a.title)
        silenced = apply(editor.text(uri), edits_for(noqa, uri))
        # An existing list gets the code; the line's code is untouched.
        assert silenced.splitlines()[2] == (
            "scaler = torch.cuda.amp.GradScaler()  # noqa: TW406, TW401"
        )
        version = editor.replace(uri, silenced)
        assert [d.code for d in await editor.diagnostics(uri, version)] == ["TW406"]

        noqa = next(a for a in await actions_at(editor, uri, 3) if "noqa" in a.title)
        silenced = apply(editor.text(uri), edits_for(noqa, uri))
        assert silenced.splitlines()[3] == "x = torch.norm(torch.ones(2))  # noqa: TW406"
        version = editor.replace(uri, silenced)
        assert await editor.diagnostics(uri, version) == []

    editor_session(scenario)


def test_fix_all_is_a_source_action(tmp_path: Path, editor_session: Callable[..., Any]) -> None:
    (tmp_path / "train.py").write_text(BUGGY)

    async def scenario(editor: Editor) -> None:
        uri = editor.open("train.py")
        offered = await actions_at(editor, uri, 0, only=[types.CodeActionKind.SourceFixAll])
        assert [(a.title, a.kind) for a in offered] == [
            ("torchwise: fix all safe problems", "source.fixAll.torchwise")
        ]
        fixed = apply(editor.text(uri), edits_for(offered[0], uri))
        ast.parse(fixed)
        version = editor.replace(uri, fixed)
        assert await editor.diagnostics(uri, version) == []
        assert await actions_at(editor, uri, 0, only=["source.fixAll.torchwise"]) == []
        quick = await actions_at(editor, uri, 2, only=[types.CodeActionKind.QuickFix])
        assert quick == []

    editor_session(scenario)


LOAD = 'import torch\nstate = torch.load("m.pt")\n'  # TW301: its fix is unsafe


def test_unsafe_fixes_only_when_the_editor_asks(
    tmp_path: Path, editor_session: Callable[..., Any]
) -> None:
    (tmp_path / "load.py").write_text(LOAD)

    async def default(editor: Editor) -> None:
        uri = editor.open("load.py")
        offered = await actions_at(editor, uri, 1)
        assert [a.title for a in offered] == ["Disable TW301 for this line (# noqa: TW301)"]

    async def asked(editor: Editor) -> None:
        uri = editor.open("load.py")
        fix = (await actions_at(editor, uri, 1))[0]
        assert fix.title == "Pass `weights_only=True` (TW301, unsafe)"
        assert not fix.is_preferred
        fixed = apply(editor.text(uri), edits_for(fix, uri))
        assert fixed.splitlines()[1] == 'state = torch.load("m.pt", weights_only=True)'
        # "fix all" applies safe fixes only.
        assert await actions_at(editor, uri, 0, only=["source.fixAll"]) == []

    editor_session(default)
    editor_session(asked, options={"unsafeFixes": True})
