"""Docstring merging and in-place source rewriting: author prose survives, edits are exact."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from torchwise.doc import source as docsource
from torchwise.doc.docstrings import GenEntry, merge, parse
from torchwise.doc.source import DocTarget, literal, rewrite
from torchwise.errors import TorchwiseError

AUTHOR = """Classify tiny images.

A paragraph the author wrote, with ``code``.

Args:
    width: Channels of the hidden layer.
        It continues on a second line.
    stale: An argument that no longer exists.

Attributes:
    conv (Conv2d, 40 params): The author's words on conv.
    cache: A plain attribute torchwise does not generate.

Note:
    Keep this note exactly.

Shape:
    - Input: an old, hand-written shape that torchwise owns now."""


def merged(text: str, out: str = "(batch, 3)") -> str:
    return merge(
        parse(text),
        default_summary="A convolutional network.",
        entries={
            "Args": [GenEntry("width", "int, default=4"), GenEntry("classes", "int, default=3")],
            "Attributes": [GenEntry("conv", "Conv2d(1, 4), 40 params")],
        },
        owned={"Shape": [f"- Output: ``{out}``, float32"], "Example": [">>> 1 + 1", "2"]},
    ).render()


def test_author_prose_and_descriptions_survive_and_owned_sections_are_replaced() -> None:
    text = merged(AUTHOR)
    assert text.startswith("Classify tiny images.\n\nA paragraph the author wrote, with ``code``.")
    assert "    width (int, default=4): Channels of the hidden layer.\n" in text
    assert "        It continues on a second line." in text
    assert "    classes (int, default=3)\n" in text  # new argument, no invented prose
    assert "stale" not in text  # the signature is the truth for Args
    assert "conv (Conv2d(1, 4), 40 params): The author's words on conv." in text
    assert "cache: A plain attribute torchwise does not generate." in text
    assert "Note:\n    Keep this note exactly." in text
    assert "hand-written shape" not in text and "- Output: ``(batch, 3)``, float32" in text


def test_merging_is_a_fixpoint() -> None:
    once = merged(AUTHOR)
    assert merged(once) == once
    # New facts change exactly the owned parts and nothing the author wrote.
    changed = merged(once, out="(batch, 5)")
    assert changed == once.replace("(batch, 3)", "(batch, 5)")


def test_sections_go_before_the_authors_trailing_sections() -> None:
    text = merged("Summary only.\n\nRaises:\n    ValueError: never.")
    assert text.index("Args:") < text.index("Raises:")
    assert merged("").startswith("A convolutional network.\n\nArgs:")


def test_returns_keeps_description_and_replaces_type() -> None:
    for existing, expected in [
        ("Returns:\n    torch.Tensor: The logits.", "Tensor[float32, (batch, 3)]: The logits."),
        ("Returns:\n    The logits, unnormalised.", "Tensor[float32, (batch, 3)]: The logits, "),
        ("Returns:\n    Tensor[float32, (batch, 2)]", "Tensor[float32, (batch, 3)]\n"),
    ]:
        out = merge(parse("Run.\n\n" + existing), default_summary="x", entries={},
                    returns="Tensor[float32, (batch, 3)]").render() + "\n"  # fmt: skip
        assert expected in out


SOURCE = (
    "# -*- coding: utf-8 -*-\n"
    "import torch  # a comment that must survive\r\n"
    "\r\n"
    "class Net(torch.nn.Module):\r\n"
    '    """Ünïcode summary."""\r\n'
    "\r\n"
    "    def forward(self, x):  # no docstring yet\r\n"
    "        @staticmethod\r\n"
    "        def helper(): pass\r\n"
    "        return x\r\n"
).encode()


def test_rewrite_touches_only_the_docstring_literals(tmp_path: Path) -> None:
    path = tmp_path / "net.py"
    docs = {
        DocTarget("Net"): 'Ünïcode summary.\n\nShape:\n    - Output: ``(batch, 3)`` "quoted"',
        DocTarget("Net", "forward"): "Run the model.",
    }
    out = rewrite(SOURCE, path, docs)
    tree = ast.parse(out)
    assert docsource.current_docstring(tree, DocTarget("Net")) == docs[DocTarget("Net")]
    assert docsource.current_docstring(tree, DocTarget("Net", "forward")) == "Run the model."
    # Everything outside the two literals is byte for byte the same, CRLF included.
    assert out.startswith(SOURCE[: SOURCE.index(b'    """')])
    assert out.endswith(SOURCE[SOURCE.index(b"        @staticmethod") :])
    assert b'        """Run the model."""\r\n        @staticmethod' in out
    assert b"\n    Shape:\r\n" in out and b'\r\n    """\r\n' in out
    assert rewrite(out, path, docs) == out  # idempotent


def test_source_that_does_not_parse_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TorchwiseError, match="cannot parse"):
        rewrite(b"class Net(:\n    pass\n", tmp_path / "bad.py", {DocTarget("Net"): "x"})


def test_a_result_that_does_not_parse_is_never_accepted(tmp_path: Path) -> None:
    broken = docsource.apply_edits(SOURCE, [docsource._Edit(0, 0, b"def (")])
    with pytest.raises(TorchwiseError, match="would not parse"):
        docsource.verify(broken, tmp_path / "net.py", {})
    wrong_doc = {DocTarget("Net"): "Something else."}
    with pytest.raises(TorchwiseError, match="would not read back"):
        docsource.verify(SOURCE, tmp_path / "net.py", wrong_doc)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \"\\'\n\t`{}é")), max_size=40))
def test_any_docstring_text_round_trips_through_the_literal(text: str) -> None:
    import inspect

    # what the renderer produces: cleaned, no trailing spaces, not blank
    cleaned = "\n".join(x.rstrip() for x in inspect.cleandoc(text).splitlines()).strip()
    # ast.get_docstring dedents the lines after the first; text whose continuation
    # lines are all indented (" x") cannot survive that in any literal, and the
    # renderer never produces it: it emits text that cleandoc leaves unchanged.
    assume(cleaned and inspect.cleandoc(cleaned) == cleaned)
    source = f"class A:\n    {literal(cleaned, '    ', chr(10))}\n"
    assert ast.get_docstring(ast.parse(source).body[0]) == cleaned  # type: ignore[arg-type]
