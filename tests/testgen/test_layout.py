"""Generated code is laid out as black and ruff format lay it out, so a formatter never
rewrites a generated file (which would make ``--check`` fight the user's hooks)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchwise.testgen.contract import evaluate_dim, python_dim
from torchwise.testgen.layout import bracketed, comment_block, docstring, expression

#: ruff from the environment running the tests (the dev extra), else from PATH.
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


def test_bracketed_fits_on_one_line() -> None:
    assert bracketed("def f", ["a: int", "b: int"], " -> None:", width=40) == [
        "def f(a: int, b: int) -> None:"
    ]


def test_bracketed_puts_the_items_on_their_own_line_when_they_fit_there() -> None:
    lines = bracketed("assert_healthy", ["model", "args", "[check_id]"], width=30)
    assert lines == ["assert_healthy(", "    model, args, [check_id]", ")"]


def test_bracketed_explodes_with_trailing_commas_when_nothing_else_fits() -> None:
    lines = bracketed(
        "x = ", ["aaaaaaaa", "bbbbbbbb", "cccccccc"], width=16, brackets="[]", collection=True
    )
    assert lines == ["x = [", "    aaaaaaaa,", "    bbbbbbbb,", "    cccccccc,", "]"]


def test_a_one_tuple_keeps_its_comma() -> None:
    assert bracketed("args = ", ["x"], width=40, one_tuple=True) == ["args = (x,)"]


def test_expression_splits_nested_calls_from_the_outside_in() -> None:
    source = "GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=1000))"
    lines = expression("return ", source, indent="    ", width=60)
    assert lines == [
        "    return GPT2LMHeadModel(",
        "        GPT2Config(",
        "            n_layer=2, n_head=2, n_embd=64, vocab_size=1000",
        "        )",
        "    )",
    ]


def test_comment_and_docstring_wrap_at_the_width() -> None:
    assert all(len(line) <= 30 for line in comment_block("word " * 20, width=30))
    lines = docstring("word " * 30, indent="    ", width=40)
    assert lines[0].startswith('    """') and lines[-1] == '    """'
    assert all(len(line) <= 40 for line in lines)


@pytest.mark.skipif(RUFF is None, reason="needs ruff (the dev extra)")
@pytest.mark.parametrize("width", [60, 88, 100])
def test_ruff_format_leaves_laid_out_code_alone(tmp_path: Path, width: int) -> None:
    lines = [
        *bracketed(
            "def make_inputs",
            ["batch: int = 4", "seq: int = 16", "*", 'device: str = "cpu"'],
            " -> tuple[tuple[int, ...], dict[str, int]]:",
            width=width,
        ),
        "    return (batch,), {}",
        "",
        "",
        "def build():",
        *expression(
            "return ",
            "Outer(Inner(alpha=1, beta=2, gamma=3, delta=4), epsilon=5, zeta=6)",
            indent="    ",
            width=width,
        ),
        "",
        "",
        *bracketed(
            "VALUES = ",
            [f'"item-{i}"' for i in range(8)],
            width=width,
            brackets="[]",
            collection=True,
        ),
    ]
    path = tmp_path / "laid_out.py"
    path.write_text("\n".join(lines) + "\n")
    assert RUFF is not None
    run = subprocess.run(
        [RUFF, "format", "--isolated", "--line-length", str(width), "--diff", str(path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout


@pytest.mark.parametrize(
    ("fitted", "python"),
    [
        ("768", "768"),
        ("batch", "batch"),
        ("2*seq_len - 1", "2 * seq_len - 1"),
        ("height*width/256", "height * width // 256"),  # the fits are exact integers
        ("seq_len/2 + 1", "seq_len // 2 + 1"),
    ],
)
def test_fitted_dims_become_python(fitted: str, python: str) -> None:
    names = {"batch": "batch", "seq_len": "seq_len", "height": "height", "width": "width"}
    assert python_dim(fitted, names) == python


def test_symbols_are_renamed_to_their_variables() -> None:
    assert python_dim("2*seq - 1", {"seq": "seq_size"}) == "2 * seq_size - 1"


@pytest.mark.parametrize("opaque", ["out_dim2", "logits_dim1", "__import__('os')", "seq ** 2"])
def test_anything_but_a_fitted_formula_is_not_checked(opaque: str) -> None:
    assert python_dim(opaque, {"seq": "seq"}) is None


def test_evaluate_dim_uses_the_sizes() -> None:
    # height=64, width=32: 64 * 32 // 256 = 8
    assert evaluate_dim("height * width // 256", {"height": 64, "width": 32}) == 8
