"""The ``editor_session`` fixture: a fresh ``torchwise server`` per test, driven by
:class:`lsp_editor.Editor`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsp_editor import Editor


@pytest.fixture
def editor_session(tmp_path: Path) -> Callable[..., Any]:
    """Run ``scenario(editor)`` against a fresh server in ``tmp_path``."""

    def run(
        scenario: Callable[[Editor], Any],
        options: dict[str, Any] | None = None,
        watch: bool = False,
    ) -> Any:
        async def main() -> Any:
            editor = Editor(tmp_path, options, watch)
            await editor.start()
            try:
                return await scenario(editor)
            finally:
                await editor.stop()

        return asyncio.run(main())

    return run
