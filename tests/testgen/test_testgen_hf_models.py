"""Tests generated for Hugging Face models (tiny configurations, no weights, no hub):
GPT-2 is measured causal, BERT is not; both files pass under pytest (one run) and
leave a formatter and a linter nothing to do."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchwise.testgen import write_tests

pytest.importorskip("transformers")

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
GPT2 = '{"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 128, "n_positions": 64}'
BERT = (
    '{"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, '
    '"intermediate_size": 64, "vocab_size": 128, "max_position_embeddings": 64}'
)


@pytest.mark.slow
def test_hugging_face_models_get_tests_that_pass(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    tests = tmp_path / "tests"
    # Two checks keep it quick: causal-leak shows the causality measurement both ways
    # (bench/testgen_real_models.py runs every check on these and other real models).
    gpt2 = write_tests("hf:GPT2LMHeadModel", init_kwargs=GPT2, output=tests / "test_gpt2.py",
                       checks=["causal-leak", "nan-inf"])  # fmt: skip
    bert = write_tests("hf:BertModel", init_kwargs=BERT, output=tests / "test_bert.py",
                       checks=["causal-leak", "nan-inf"])  # fmt: skip

    assert "from transformers import GPT2Config, GPT2LMHeadModel" in gpt2.text
    assert "input_ids (batch, seq) -> logits (batch, seq, 128)" in gpt2.text
    assert "assert out.logits.shape == (batch, seq, 128)" in gpt2.text
    assert gpt2.doctor_options["causal_dim"] == 1  # measured on the token input
    causal = next(c for c in bert.checks if c.id == "causal-leak")
    assert not causal.included and causal.reason.startswith("not a causal model")
    assert "pooler_output (batch, 32)" in bert.text

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "--import-mode=importlib", str(tests)],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
    if RUFF is not None:
        for command in (["format", "--check"], ["check", "--select", "E4,E7,E9,F,W,I,B,UP"]):
            lint = subprocess.run([RUFF, *command, "--isolated", str(tests)],
                                  capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
            assert lint.returncode == 0, lint.stdout + lint.stderr
