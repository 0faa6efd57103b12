"""`torchwise doc --markdown`: the reference page, its Mermaid diagram, its usage example."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from torchwise.cli import app
from torchwise.doc.mermaid import escape, render, trace_flow

REPO = Path(__file__).resolve().parents[2]
MODEL = '''\
import torch
from torch import nn


class Residual(nn.Module):
    """A residual MLP block "with quotes" and <angle brackets> in its docstring."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))  # (B, T, dim)
'''

NODE = re.compile(r'^ +(n_\w+)(\[/"[^"]*"/\]|\["[^"]*"\])$')
SUBGRAPH = re.compile(r'^ +subgraph (sg_\w+)\["[^"]*"\]$')
EDGE = re.compile(r"^ +(n_\w+) --> (n_\w+)$")


def check_mermaid(source: str) -> list[tuple[str, str]]:
    """The grammar we emit, line by line; every edge joins declared nodes."""
    lines = source.splitlines()
    assert lines[0] == "flowchart TD"
    nodes: set[str] = set()
    edges, depth = [], 0
    for line in lines[1:]:
        if match := NODE.match(line):
            assert match.group(1) not in nodes, f"duplicate node {match.group(1)}"
            nodes.add(match.group(1))
        elif SUBGRAPH.match(line):
            depth += 1
        elif line.strip() == "end":
            depth -= 1
            assert depth >= 0
        elif match := EDGE.match(line):
            edges.append((match.group(1), match.group(2)))
        else:
            raise AssertionError(f"not Mermaid flowchart syntax we emit: {line!r}")
    assert depth == 0
    assert all(a in nodes and b in nodes for a, b in edges)
    return edges


def extract(page: str, lang: str) -> str:
    match = re.search(rf"```{lang}\n(.*?)\n```", page, re.S)
    assert match is not None, f"no {lang} block"
    return match.group(1)


def run_usage(code: str) -> None:
    saved = list(sys.path)
    try:
        exec(compile(code, "<usage>", "exec"), {"__name__": "__usage__"})
    finally:
        sys.path[:] = saved


def test_escape_uses_mermaid_entity_codes() -> None:
    assert escape('a "b" <c> #d & `e`') == "a #quot;b#quot; #60;c#62; #35;d #38; #96;e#96;"
    assert escape("two\nlines") == "two<br/>lines"


def test_data_flow_shows_the_skip_connection() -> None:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(8)
            self.ff = nn.Linear(8, 8)
            self.out = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = x + self.ff(self.norm(x).relu())  # skip around norm+ff
            return self.out(h)

    flow = trace_flow(Block().to("meta"), (torch.empty(2, 8, device="meta"),), {}, ["x"])
    assert flow.units == ["norm", "ff", "out"]
    assert ("input:x", "norm") in flow.edges and ("input:x", "out") in flow.edges
    assert ("norm", "ff") in flow.edges and ("ff", "out") in flow.edges
    edges = check_mermaid(render(flow, {"x": "(batch, 8)"}, "(batch, 8)"))
    assert ("n_input_x", "n_out") in edges


def test_markdown_page_has_every_section_and_a_runnable_usage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "resmlp.py").write_text(MODEL)
    args = ["doc", "resmlp.py:Residual", "--input", "f32[2,5,8]", "--markdown", "docs/res.md"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    page = (tmp_path / "docs" / "res.md").read_text()
    sections = "Overview|Structure and data flow|Shapes|Layers|Parameters|Memory|Train and eval"
    for heading in ["# Residual", *(f"## {s}" for s in sections.split("|")), "## Usage"]:
        assert f"\n{heading}\n" in f"\n{page}"
    assert "| `x` | `(batch, seq_len, 8)` | float32 |" in page
    # LayerNorm 2*8 + Linear 8*32+32 + Linear 32*8+8 = 16 + 288 + 264 = 568; x4 bytes
    assert "| Parameters | 568 (2.22 KiB) |" in page
    assert "#quot;with quotes#quot;" not in page  # prose is Markdown, not a Mermaid label
    assert "&lt;angle brackets&gt;" in page  # would vanish as an HTML tag on GitHub
    edges = check_mermaid(extract(page, "mermaid"))
    assert ("n_input_x", "n_norm") in edges
    sys.modules.pop("resmlp", None)
    run_usage(extract(page, "python"))  # asserts the documented output shape itself
    # --check with --markdown: fresh page passes, a changed model fails, nothing written.
    assert (
        CliRunner().invoke(app, [*args[:4], "--check", *args[4:]]).exit_code == 1
    )  # no docstrings yet
    assert CliRunner().invoke(app, [*args[:4], "--write", *args[4:]]).exit_code == 0
    assert CliRunner().invoke(app, [*args[:4], "--check", *args[4:]]).exit_code == 0


@pytest.mark.parametrize(
    "page", sorted((REPO / "docs" / "models").glob("*.md")), ids=lambda p: p.name
)
def test_committed_reference_pages_usage_examples_run(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = page.read_text()
    check_mermaid(extract(text, "mermaid"))
    monkeypatch.chdir(REPO)
    for name in ("model",):
        sys.modules.pop(name, None)
    run_usage(extract(text, "python"))
