"""Fixtures of the run tests (the helpers are in ``run_helpers``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from run_helpers import run_source


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """``run(source, **options)``: the result of running ``source`` in this process."""

    def runner(source: str, **options: Any) -> dict[str, Any]:
        return run_source(tmp_path, source, **options)

    return runner
