"""The language server: pygls speaks the protocol, review finds the problems.

Each open document (a file, or a notebook's code cells) is analysed when it is
opened, changed or saved, and its diagnostics are published. Analyses run one
at a time in a worker thread, each on the newest text when it starts, so the
protocol keeps being read while review works; changes that arrive during an
analysis are folded into one more (no fixed delay is added to a keystroke).

What an analysis sees of the rest of the project is the files the text
imports, as the editor holds them: the open buffers (kept in a review
``Workspace`` with each file's summary, made again only when its text
changes), else the disk. So an edit to an open file that changes what other
files can see of it (its classes, functions, returns), its saving, or a change
on disk that the editor reports re-analyses the open files whose imports reach
it; a change to a ``pyproject.toml`` re-analyses every open file with its new
settings. Nothing else of the workspace is read.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer

from torchwise import __version__
from torchwise.review import Workspace
from torchwise.server.analysis import Analysis, Placer, Source, analyse
from torchwise.server.imports import ImportGraph
from torchwise.server.settings import ClientOptions, Resolved, SettingsCache

logger = logging.getLogger(__name__)

#: An analysis overtaken by a newer change is not published, unless this many in
#: a row were: a typist faster than review still sees findings.
_MAX_SKIPPED = 2


class TorchwiseLanguageServer(LanguageServer):
    """pygls's server with torchwise's state: the analyses, settings, import graph."""

    def __init__(self) -> None:
        super().__init__(
            "torchwise",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        cells=[types.NotebookCellLanguage(language="python")]
                    )
                ],
                save=True,
            ),
        )
        self.settings = SettingsCache()
        self.review_workspace = Workspace()
        self.graph = ImportGraph(self.review_workspace)
        self.open_keys: set[str] = set()
        self.analyses: dict[str, tuple[Analysis, Placer]] = {}
        self._scheduled: dict[str, bool] = {}  # key -> another run wanted after this one
        self._skipped: dict[str, int] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        self._lock = asyncio.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchwise-review")
        self._config_seen: dict[object, Resolved] = {}
        self._errors_shown: set[str] = set()

    # -- documents -------------------------------------------------------------
    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)

    def key_of(self, uri: str) -> str:
        """The document an editor URI belongs to: a notebook for a cell, else itself."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        return notebook.uri if notebook is not None else uri

    def path_of(self, uri: str) -> str:
        """The file a document stands for; for an unsaved one, a file of its name in
        the workspace (for the settings and the imports beside it)."""
        path = uris.to_fs_path(uri) if urlparse(uri).scheme == "file" else None
        if path:
            return os.path.normpath(path)
        name = PurePosixPath(unquote(urlparse(uri).path)).name
        if not name.endswith((".py", ".pyi", ".ipynb")):
            name = "untitled.py"
        return os.path.join(self.workspace.root_path or os.getcwd(), name)

    def source(self, key: str) -> Source | None:
        """The text of an open document as the editor holds it now."""
        if key not in self.open_keys:
            return None
        notebook = self.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            cells = [
                (cell.document, self.workspace.get_text_document(cell.document).source)
                for cell in notebook.cells
                if cell.kind == types.NotebookCellKind.Code
            ]
            return Source.notebook(key, self.path_of(key), notebook.version, cells)
        document = self.workspace.get_text_document(key)
        return Source(key, self.path_of(key), document.version, document.source)

    def open_paths(self) -> dict[str, str]:
        """path -> key of every open document."""
        return {self.path_of(key): key for key in self.open_keys}

    # -- scheduling ------------------------------------------------------------
    def request(self, key: str) -> None:
        """Analyse ``key`` soon; a request while it is analysed asks for one more run."""
        if key in self._scheduled:
            self._scheduled[key] = True
            return
        self._scheduled[key] = False
        task = asyncio.ensure_future(self._drive(key))
        self._tasks.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._tasks.discard)

    async def _drive(self, key: str) -> None:
        try:
            while True:
                await self.refresh(key)
                if not self._scheduled.get(key):
                    return
        finally:
            self._scheduled.pop(key, None)

    async def refresh(self, key: str) -> tuple[Analysis, Placer] | None:
        """Analyse the newest text of ``key`` and publish its diagnostics."""
        async with self._lock:
            if key in self._scheduled:
                self._scheduled[key] = False  # what was asked until now, this run answers
            source = self.source(key)
            if source is None:
                return None
            resolved = self.settings.for_path(source.path)
            self._note_settings(key, resolved)
            loop = asyncio.get_running_loop()
            try:
                visible_change = False
                if source.cells is None:
                    visible_change = await loop.run_in_executor(
                        self._worker, self.review_workspace.set_buffer, source.path, source.text
                    )
                analysis = await loop.run_in_executor(
                    self._worker, analyse, source, resolved.settings, self.review_workspace
                )
            except Exception as exc:  # review's bug must not stop the editor's server
                logger.exception("analysis of %s failed", key)
                self._show_once(f"torchwise: analysing {source.path} failed: {exc}")
                return None
        if key not in self.open_keys:
            return None  # closed meanwhile
        placer = Placer(source, self.encoding)
        self.analyses[key] = (analysis, placer)
        if visible_change and len(self.analyses) > 1:
            self.saved(source.path)  # the files importing it see the unsaved edit
        if self._overtaken(key, source) and self._skipped.get(key, 0) < _MAX_SKIPPED:
            self._skipped[key] = self._skipped.get(key, 0) + 1
        else:
            self._skipped[key] = 0
            self._publish(analysis, placer)
        return analysis, placer

    def _overtaken(self, key: str, source: Source) -> bool:
        current = self.source(key)
        return bool(self._scheduled.get(key)) and (current is None or current.text != source.text)

    async def current(self, uri: str) -> tuple[Analysis, Placer] | None:
        """The analysis of the text the editor holds now (analysing it if needed)."""
        key = self.key_of(uri)
        source = self.source(key)
        if source is None:
            return None
        known = self.analyses.get(key)
        if known is not None and known[0].source.text == source.text:
            return known
        return await self.refresh(key)

    def _publish(self, analysis: Analysis, placer: Placer) -> None:
        from torchwise.server.diagnostics import diagnostics_by_uri

        version = analysis.source.version if analysis.source.cells is None else None
        for uri, diagnostics in diagnostics_by_uri(analysis, placer).items():
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
            )

    def forget(self, key: str) -> None:
        """A closed document: its diagnostics cleared, its state dropped."""
        known = self.analyses.pop(key, None)
        self.open_keys.discard(key)
        path = self.path_of(key)
        self.review_workspace.drop_buffer(path)  # the file on disk is what others import again
        self.saved(path)
        uris_ = known[0].source.uris() if known is not None else [key]
        for uri in uris_:
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )

    # -- the project -------------------------------------------------------------
    def saved(self, path: str) -> None:
        """``path`` changed on disk: re-analyse the open files whose imports reach it."""
        opened = self.open_paths()
        for dependent in self.graph.dependents(path, opened):
            self.request(opened[dependent])

    def configuration_changed(self) -> None:
        self.settings.clear()
        self._config_seen.clear()  # every open file is requested here already
        for key in sorted(self.open_keys):
            self.request(key)

    def _note_settings(self, key: str, resolved: Resolved) -> None:
        """Show a configuration error once; when the settings of ``key`` were read
        anew (the file changed), the other open files under them follow."""
        if resolved.error is not None:
            self._show_once(
                f"torchwise: {resolved.error} (using the default rules until it is fixed)"
            )
        previous = self._config_seen.get(resolved.config_path)
        self._config_seen[resolved.config_path] = resolved
        if previous is not None and previous is not resolved:
            for other in sorted(self.open_keys - {key}):
                self.request(other)

    def _show_once(self, message: str) -> None:
        if message in self._errors_shown:
            return
        self._errors_shown.add(message)
        self.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Error, message=message)
        )

    def set_options(self, options: object) -> None:
        self.settings = SettingsCache(ClientOptions.from_options(options))
