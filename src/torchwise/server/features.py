"""The protocol's requests and notifications, each handed to the server's state.

Documents: ``didOpen``/``didChange``/``didSave``/``didClose`` for files and for
notebooks; ``didChangeWatchedFiles`` for changes on disk (registered at start
when the editor supports it). Requests: ``hover`` (the rule's documentation over
a finding) and ``codeAction`` (fixes, ``# noqa``, and ``source.fixAll.torchwise``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from lsprotocol import types
from pygls import uris

from torchwise.review import Applicability, Finding
from torchwise.server import actions
from torchwise.server.analysis import Analysis, Placer
from torchwise.server.diagnostics import SOURCE, diagnostic, hover_text
from torchwise.server.lsp import TorchwiseLanguageServer

_WATCHERS = ("**/pyproject.toml", "**/*.py")


def build_server() -> TorchwiseLanguageServer:
    """A torchwise language server with every feature registered (not started)."""
    server = TorchwiseLanguageServer()
    _register_documents(server)
    _register_requests(server)
    return server


def _register_documents(server: TorchwiseLanguageServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        server.set_options(params.initialization_options)

    @server.feature(types.INITIALIZED)
    def initialized(params: types.InitializedParams) -> None:
        watched = server.client_capabilities.workspace
        dynamic = watched is not None and watched.did_change_watched_files is not None
        if dynamic and watched.did_change_watched_files.dynamic_registration:  # type: ignore[union-attr]
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=glob) for glob in _WATCHERS]
            )
            registration = types.Registration(
                id="torchwise-watched-files",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=options,
            )
            server.client_register_capability(
                types.RegistrationParams(registrations=[registration])
            )

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        document = params.text_document
        if server.workspace.get_notebook_document(cell_uri=document.uri):
            return  # a cell: its notebook is analysed
        if document.language_id != "python" and not document.uri.endswith((".py", ".pyi")):
            return  # an editor that sends every file (a pyproject.toml is not Python)
        server.open_keys.add(document.uri)
        server.request(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.request(server.key_of(params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        key = server.key_of(params.text_document.uri)
        if key in server.open_keys:
            server.request(key)
        _changed_on_disk(server, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        if params.text_document.uri in server.open_keys:
            server.forget(params.text_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(params: types.DidOpenNotebookDocumentParams) -> None:
        server.open_keys.add(params.notebook_document.uri)
        server.request(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(params: types.DidChangeNotebookDocumentParams) -> None:
        server.request(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(params: types.DidSaveNotebookDocumentParams) -> None:
        server.request(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(params: types.DidCloseNotebookDocumentParams) -> None:
        server.forget(params.notebook_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(params: types.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            _changed_on_disk(server, change.uri)


def _changed_on_disk(server: TorchwiseLanguageServer, uri: str) -> None:
    path = uris.to_fs_path(uri)
    if not path:
        return
    if os.path.basename(path) == "pyproject.toml":
        server.configuration_changed()
    elif path.endswith(".py"):
        server.saved(os.path.normpath(path))


def _register_requests(server: TorchwiseLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(params: types.HoverParams) -> types.Hover | None:
        current = await server.current(params.text_document.uri)
        if current is None:
            return None
        analysis, placer = current
        index = placer.index_of(params.text_document.uri)
        offset = index.offset(params.position)
        under = [
            (finding, span)
            for finding, span in _placed(analysis, placer, params.text_document.uri)
            if span[0] <= offset <= span[1]
        ]
        if not under:
            return None
        return types.Hover(
            contents=types.MarkupContent(
                kind=types.MarkupKind.Markdown, value=hover_text([f for f, _ in under])
            ),
            range=index.range(*under[0][1]),
        )

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, actions.FIX_ALL_KIND],
            resolve_provider=False,
        ),
    )
    async def code_action(params: types.CodeActionParams) -> list[types.CodeAction] | None:
        current = await server.current(params.text_document.uri)
        if current is None:
            return None
        analysis, placer = current
        return _actions(server, analysis, placer, params)


def _placed(analysis: Analysis, placer: Placer, uri: str) -> list[tuple[Finding, tuple[int, int]]]:
    """The findings shown in document ``uri``, with their offsets in its text."""
    placed = []
    for finding in analysis.findings:
        place = placer.place(*placer.finding_span(finding))
        if place is not None and place.uri == uri:
            placed.append((finding, (place.start, place.end)))
    return placed


def _actions(
    server: TorchwiseLanguageServer,
    analysis: Analysis,
    placer: Placer,
    params: types.CodeActionParams,
) -> list[types.CodeAction]:
    uri = params.text_document.uri
    only = params.context.only
    index = placer.index_of(uri)
    first, last = params.range.start.line, params.range.end.line
    minimum = Applicability.UNSAFE if server.settings.options.unsafe_fixes else Applicability.SAFE
    found: list[types.CodeAction] = []
    for finding, span in _placed(analysis, placer, uri):
        range_ = index.range(*span)
        # The editor asks for the diagnostics it shows, or for the cursor's lines.
        asked = any(_same(d, finding, range_) for d in params.context.diagnostics)
        if not asked and (range_.start.line > last or range_.end.line < first):
            continue
        shown = _shown(params.context.diagnostics, finding, range_)
        fix = finding.fix
        if (
            actions.wanted(types.CodeActionKind.QuickFix, only)
            and fix is not None
            and fix.applicability.rank >= minimum.rank
        ):
            action = actions.fix_action(analysis, placer, finding, shown)
            if action is not None:
                found.append(action)
        if actions.wanted(types.CodeActionKind.QuickFix, only):
            noqa = actions.noqa_action(analysis, placer, finding, shown)
            if noqa is not None:
                found.append(noqa)
    if actions.wanted(actions.FIX_ALL_KIND, only):
        fix_all = actions.fix_all_action(analysis, placer)
        if fix_all is not None:
            found.append(fix_all)
    return found


def _shown(
    diagnostics: Sequence[types.Diagnostic], finding: Finding, range_: types.Range
) -> types.Diagnostic:
    """The editor's copy of the finding's diagnostic (it matches actions to them)."""
    for shown in diagnostics:
        if _same(shown, finding, range_):
            return shown
    return diagnostic(finding, range_)


def _same(shown: types.Diagnostic, finding: Finding, range_: types.Range) -> bool:
    return shown.source == SOURCE and shown.code == finding.code and shown.range == range_
