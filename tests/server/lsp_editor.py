"""A real LSP client (pygls's own) driving ``torchwise server`` as a subprocess.

The server runs in an interpreter where torch cannot be imported, so every test
here also proves that the language server never imports it. Waits are for
messages, never for time: a wait ends when the server publishes what the test
expects (the generous limit only keeps a broken server from hanging the suite).
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.client import LanguageClient

_NO_TORCH = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTorch())
    from torchwise.cli import main
    main(sys.argv[1:])
    """
)
#: Only a server that stopped answering reaches it; no verdict depends on it.
_HANG = 120.0


class Editor:
    """What an editor does: opens, edits and saves documents, asks for hovers and
    code actions, and keeps every diagnostic the server publishes."""

    def __init__(self, root: Path, options: dict[str, Any] | None, watch: bool) -> None:
        self.root = root
        self.options = options
        self.watch = watch
        self.client = LanguageClient("torchwise-tests", "1")
        self.published: dict[str, list[types.PublishDiagnosticsParams]] = {}
        self.messages: list[str] = []
        self.registrations: list[types.Registration] = []
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._versions: dict[str, int] = {}
        self._texts: dict[str, str] = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _published(params: types.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append(params)
            self._wake()

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def _shown(params: types.ShowMessageParams) -> None:
            self.messages.append(params.message)
            self._wake()

        @self.client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def _register(params: types.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)
            self._wake()

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        await self.client.start_io(sys.executable, "-c", _NO_TORCH, "server", cwd=str(self.root))
        workspace = types.WorkspaceClientCapabilities(
            did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(
                dynamic_registration=self.watch
            )
        )
        await asyncio.wait_for(
            self.client.initialize_async(
                types.InitializeParams(
                    capabilities=types.ClientCapabilities(workspace=workspace),
                    root_uri=uris.from_fs_path(str(self.root)),
                    initialization_options=self.options,
                )
            ),
            _HANG,
        )
        self.client.initialized(types.InitializedParams())

    async def stop(self) -> None:
        await asyncio.wait_for(self.client.shutdown_async(None), _HANG)
        self.client.exit(None)
        await asyncio.wait_for(self.client.stop(), _HANG)

    # -- documents ---------------------------------------------------------------
    def uri(self, name: str) -> str:
        return str(uris.from_fs_path(str(self.root / name)))

    def open(
        self, name: str, text: str | None = None, uri: str | None = None, language: str = "python"
    ) -> str:
        uri = uri or self.uri(name)
        text = (self.root / name).read_text() if text is None else text
        self._versions[uri] = 1
        self._texts[uri] = text
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id=language, version=1, text=text
                )
            )
        )
        return uri

    def replace(self, uri: str, text: str) -> int:
        """Send the whole new text as one incremental change over the old one."""
        old = self._texts[uri]
        lines = old.split("\n")
        whole = types.Range(
            start=types.Position(line=0, character=0),
            end=types.Position(line=len(lines) - 1, character=len(lines[-1])),
        )
        return self.change(
            uri, [types.TextDocumentContentChangePartial(range=whole, text=text)], text
        )

    def change(
        self, uri: str, changes: list[types.TextDocumentContentChangeEvent], text: str
    ) -> int:
        self._versions[uri] += 1
        self._texts[uri] = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=uri, version=self._versions[uri]
                ),
                content_changes=changes,
            )
        )
        return self._versions[uri]

    def save(self, uri: str, name: str) -> None:
        (self.root / name).write_text(self._texts[uri])
        self.client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def open_notebook(self, name: str, cells: list[str]) -> str:
        """Open a notebook of code cells; cell N's URI is ``<notebook URI>#cellN``."""
        uri = self.uri(name)
        self._notebook_version = 1
        self._cells = [f"{uri}#cell{number}" for number in range(1, len(cells) + 1)]
        self.client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=uri,
                    notebook_type="jupyter-notebook",
                    version=1,
                    cells=[
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=cell)
                        for cell in self._cells
                    ],
                ),
                cell_text_documents=[
                    types.TextDocumentItem(uri=cell, language_id="python", version=1, text=text)
                    for cell, text in zip(self._cells, cells, strict=True)
                ],
            )
        )
        return uri

    def edit_cell(self, notebook: str, number: int, text: str) -> None:
        """Replace the text of code cell ``number`` (1-based)."""
        self._notebook_version += 1
        whole = types.Range(
            start=types.Position(line=0, character=0),
            end=types.Position(line=1000, character=0),
        )
        cell = types.VersionedTextDocumentIdentifier(
            uri=self._cells[number - 1], version=self._notebook_version
        )
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(
                    uri=notebook, version=self._notebook_version
                ),
                change=types.NotebookDocumentChangeEvent(
                    cells=types.NotebookDocumentCellChanges(
                        text_content=[
                            types.NotebookDocumentCellContentChanges(
                                document=cell,
                                changes=[
                                    types.TextDocumentContentChangePartial(range=whole, text=text)
                                ],
                            )
                        ]
                    )
                ),
            )
        )

    def text(self, uri: str) -> str:
        return self._texts[uri]

    # -- waiting for the server --------------------------------------------------
    def _wake(self) -> None:
        for condition, future in list(self._waiters):
            if not future.done() and condition():
                future.set_result(None)

    async def until(self, condition: Callable[[], bool]) -> None:
        if condition():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((condition, future))
        await asyncio.wait_for(future, _HANG)

    async def diagnostics(self, uri: str, version: int | None = None) -> list[types.Diagnostic]:
        """The diagnostics published for ``uri`` at ``version`` (default: its newest),
        waiting for them."""
        wanted = self._versions.get(uri) if version is None else version

        def arrived() -> bool:
            return any(p.version == wanted for p in self.published.get(uri, []))

        await self.until(arrived)
        return list([p for p in self.published[uri] if p.version == wanted][-1].diagnostics)

    def publish_count(self, uri: str) -> int:
        return len(self.published.get(uri, []))

    async def next_publish(self, uri: str, after: int) -> list[types.Diagnostic]:
        """The first diagnostics for ``uri`` published after the first ``after``."""
        await self.until(lambda: self.publish_count(uri) > after)
        return list(self.published[uri][after].diagnostics)
