"""A script that stopped before its first step: what it needed, in one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from torchwise.run.needs import needs_of

Run = Callable[..., dict[str, Any]]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ModuleNotFoundError("No module named 'flash_attn.ops'", name="flash_attn.ops"),
         "it needs the package 'flash_attn'"),
        (FileNotFoundError(2, "No such file or directory", "data/train.csv"),
         "it needs data/train.csv, which is not here"),
        (AssertionError("Torch not compiled with CUDA enabled"), "it needs a GPU"),
        (ConnectionError("Max retries exceeded with url: /datasets/x"), "it needs the network"),
        (ValueError("Error initializing torch.distributed using env:// rendezvous: environment "
                    "variable RANK expected, but not set"), "run it with --nproc N"),
    ],
)  # fmt: skip
def test_what_stopped_a_script_before_its_first_step(error: Exception, expected: str) -> None:
    needs = needs_of(error, simulated_gpu=False)
    assert needs is not None and expected in needs


def test_the_scripts_own_bugs_are_not_needs() -> None:
    assert (
        needs_of(RuntimeError("mat1 and mat2 shapes cannot be multiplied"), simulated_gpu=False)
        is None
    )
    assert needs_of(KeyError("state_dict"), simulated_gpu=False) is None
    # with a simulated GPU, a CUDA assertion is the script's own device code
    assert (
        needs_of(AssertionError("Torch not compiled with CUDA enabled"), simulated_gpu=True) is None
    )


def test_a_run_that_never_trained_says_what_it_lacked(run: Run) -> None:
    result = run("import numpy as np\nrows = np.loadtxt('missing/rows.csv')\n")
    (crash,) = [f for f in result["findings"] if f["code"] == "TWR001"]
    assert "it needs missing/rows.csv, which is not here" in crash["message"]
