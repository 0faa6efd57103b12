"""The SARIF 2.1.0 envelope shared by every torchwise command that emits SARIF.

Each command describes its own rules and results; this module wraps them in
one log with torchwise as the tool, so `review` and `ckpt scan` reports look
the same to GitHub code scanning and merge cleanly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchwise import __version__

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
REPOSITORY = "https://github.com/torchwise/torchwise"


def sarif_log(
    rules: list[dict[str, Any]], results: list[dict[str, Any]], **run: Any
) -> dict[str, Any]:
    """A SARIF log with one run; ``run`` adds run-level properties (e.g. ``columnKind``)."""
    driver = {
        "name": "torchwise",
        "version": __version__,
        "semanticVersion": __version__,
        "informationUri": REPOSITORY,
        "rules": rules,
    }
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, **run, "results": results}],
    }


def artifact_location(path: str) -> dict[str, str]:
    """A SARIF ``artifactLocation``: relative to the working directory (``%SRCROOT%``) when the
    file is under it, as code scanning resolves it against the checkout; else a file URI."""
    absolute = Path(path).resolve()
    try:
        relative = absolute.relative_to(Path.cwd().resolve())
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": relative.as_posix(), "uriBaseId": "%SRCROOT%"}
