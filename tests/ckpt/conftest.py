"""Build the checkpoint corpus once per session (it takes a couple of seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ckpt_corpus import Hostile, build_benign, build_hostile


@pytest.fixture(scope="session")
def marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file every hostile payload would create; it must never exist."""
    return tmp_path_factory.mktemp("payload-target") / "PAYLOAD_RAN"


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory, marker: Path) -> dict[str, Hostile]:
    built = build_hostile(tmp_path_factory.mktemp("hostile"), marker)
    return {h.technique: h for h in built}


@pytest.fixture(scope="session")
def benign(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_benign(tmp_path_factory.mktemp("benign"))
