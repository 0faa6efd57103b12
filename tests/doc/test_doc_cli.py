"""`torchwise doc` end to end on a model file in tmp_path: write, check, diff, markdown."""

from __future__ import annotations

import doctest
import importlib.util
import inspect
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchwise.cli import app
from torchwise.doc.docstrings import parse

MODEL = '''\
"""Tiny models for the torchwise doc tests."""

import torch
from torch import nn


class TinyNet(nn.Module):
    """Classify 8x8 grey images.

    The author's paragraph, which torchwise must keep.

    Args:
        width: Channels of the hidden layer.

    Note:
        Keep this note too.
    """

    def __init__(self, width: int = 4, classes: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, width, 3, padding=1)  # a comment that must survive
        self.drop = nn.Dropout(0.25)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x).relu().mean((2, 3))  # (B, width)
        return self.head(self.drop(h))
'''
INPUT = ("--input", "f32[2,1,8,8]")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "tinynet.py"
    path.write_text(MODEL)
    return path


def doc(path: Path, *args: str) -> tuple[int, str, str]:
    # Each CLI call is a fresh process for a user; here, forget the module imported
    # from this file so that an edited file is imported again.
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == str(path.resolve()):
            del sys.modules[name]
    result = CliRunner().invoke(app, ["doc", f"{path.name}:TinyNet", *INPUT, *args])
    return result.exit_code, result.stdout, result.stderr


def test_write_then_check_passes_and_write_is_idempotent(project: Path) -> None:
    assert doc(project, "--check")[0] == 1  # never documented: stale
    code, _, err = doc(project, "--write")
    assert code == 0, err
    written = project.read_bytes()
    assert doc(project, "--check")[0] == 0
    assert doc(project, "--write")[0] == 0
    assert project.read_bytes() == written  # second run: no change at all


def test_write_keeps_author_prose_and_everything_outside_docstrings(project: Path) -> None:
    assert doc(project, "--write")[0] == 0
    text = project.read_text()
    assert "    The author's paragraph, which torchwise must keep.\n" in text
    assert "        width (int, default=4): Channels of the hidden layer.\n" in text
    assert "    Note:\n        Keep this note too.\n" in text
    assert "# a comment that must survive" in text
    # The source minus docstrings is unchanged.
    strip = re.compile(r'\n *"""(.|\n)*?"""')
    assert strip.sub("", text) == strip.sub("", MODEL)
    assert "        - x: ``(batch, 1, height, width)``, float32" in text
    assert "- Output: ``(batch, 3)``, float32" in text
    assert "x (Tensor[float32, (batch, 1, height, width)])" in text
    assert "Tensor[float32, (batch, 3)]" in text
    assert "Dropout (``drop``): train mode zeroes activations with p=0.25" in text


def test_changing_a_layer_width_makes_check_fail_with_a_readable_diff(project: Path) -> None:
    assert doc(project, "--write")[0] == 0
    edited = project.read_text().replace(
        "nn.Linear(width, classes)", "nn.Linear(width, 2 * classes)"
    )
    project.write_text(edited)
    code, out, err = doc(project, "--check")
    assert code == 1
    assert project.read_text() == edited  # --check writes nothing
    assert out.startswith("--- a/tinynet.py\n+++ b/tinynet.py\n")
    assert (
        "-        - Output: ``(batch, 3)``, float32\n+        - Output: ``(batch, 6)``, float32"
        in out
    )
    assert "-        head (Linear(in_features=4, out_features=3, bias=True), 15 params)" in out
    assert "+        head (Linear(in_features=4, out_features=6, bias=True), 30 params)" in out
    # the hint repeats every option that names the model, so it can be pasted as is
    assert "run `torchwise doc tinynet.py:TinyNet --input 'f32[2,1,8,8]' --write`" in err


def test_diff_prints_the_change_and_writes_nothing(project: Path) -> None:
    code, out, _ = doc(project, "--diff")
    assert code == 1  # it would change the file (as review --diff)
    assert "+    Shape:" in out
    assert project.read_text() == MODEL
    assert doc(project, "--write")[0] == 0
    assert doc(project, "--diff")[:2] == (0, "")  # nothing left to change


def test_a_file_that_does_not_parse_is_never_written(project: Path) -> None:
    assert doc(project, "--write")[0] == 0
    # Importable (the bad line is in a string the parser sees only at the end)? No:
    # make it unparsable after import by editing the file between import and write.
    module_text = project.read_text()
    broken = module_text + "\ndef oops(:\n"
    project.write_text(broken)
    code, _, err = doc(project, "--write")
    assert code == 2
    assert "error:" in err
    assert project.read_text() == broken


def test_the_written_example_block_runs_under_doctest(project: Path) -> None:
    assert doc(project, "--write")[0] == 0
    spec = importlib.util.spec_from_file_location("tinynet_doctest", project)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docstring = parse(inspect.getdoc(module.TinyNet) or "")
    example = next(b for b in docstring.blocks if b.title == "Example")
    assert ">>> model = TinyNet().eval()" in example.lines
    assert "torch.Size([2, 3])" in example.lines
    results = doctest.testmod(module, verbose=False)
    assert results.attempted >= 5 and results.failed == 0


def test_default_prints_docstrings_without_touching_the_file(project: Path) -> None:
    code, out, _ = doc(project)
    assert code == 0
    assert "# TinyNet (tinynet.py)" in out and "# TinyNet.forward (tinynet.py)" in out
    assert project.read_text() == MODEL


def test_bad_input_is_a_clear_error(project: Path) -> None:
    result = CliRunner().invoke(app, ["doc", "tinynet.py:TinyNet", "--input", "f32[2,1,8"])
    assert result.exit_code == 2
    assert "bad input spec" in result.stderr
    result = CliRunner().invoke(app, ["doc", "tinynet.py:TinyNet", "--input", "f32[2,5,8,8]"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
