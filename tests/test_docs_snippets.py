"""Every Python snippet in the README and docs/ runs, so the docs cannot drift from the API.

Each ```python block of ``README.md`` and ``docs/*.md`` is executed in a fresh
namespace, in a temporary directory where ``examples/`` is the repository's
examples. A block that only illustrates (a docstring, a user's own test file)
is marked on the line before its fence::

    <!-- doc-test: skip the generated docstring, shown for reading -->

Rule pages (``docs/rules/``) have their own test: each Example must trigger its
rule. Generated model pages (``docs/models/``) are checked by ``doc --check``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SKIP = re.compile(r"<!--\s*doc-test:\s*skip\b(?P<reason>.*?)-->")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int
    code: str
    skip_reason: str | None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    found: list[Snippet] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if match is None or not match.group("lang"):
            index += 1
            continue
        start = index
        index += 1
        body: list[str] = []
        while index < len(lines) and not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        index += 1
        if match.group("lang") != "python":
            continue
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        skip = SKIP.search(before)
        reason = skip.group("reason").strip() if skip else None
        found.append(Snippet(path, start + 2, "\n".join(body) + "\n", reason))
    return found


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SNIPPETS = [snippet for doc in DOCS for snippet in snippets(doc)]


def test_the_docs_have_snippets_to_run() -> None:
    runnable = [s for s in SNIPPETS if s.skip_reason is None]
    assert len(runnable) >= 3, "the collector found no runnable snippets: is the fence regex right?"


def test_every_skip_says_why() -> None:
    unexplained = [s.id for s in SNIPPETS if s.skip_reason == ""]
    assert not unexplained, f"doc-test: skip needs a reason: {unexplained}"


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.id)
def test_snippet_runs(snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if snippet.skip_reason is not None:
        pytest.skip(f"illustration: {snippet.skip_reason}")
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = compile(snippet.code, snippet.id, "exec")
    exec(code, {"__name__": "__doc_snippet__"})


#: A line that is only an ALL_CAPS_NAME: a template's marker that nothing filled in
#: (docs/tune.md carried REPORT_PLACEHOLDER where its real report belongs).
MARKER = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")


def test_no_template_marker_is_left_in_the_docs() -> None:
    left = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MARKER.match(line.strip())
    ]
    assert not left, f"unfilled template markers: {left}"
