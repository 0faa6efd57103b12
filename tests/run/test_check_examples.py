"""Every check trips on its documented Example and stays silent on its Use instead.

The scripts are the ones ``torchwise run --explain CODE`` prints (the checks'
docstrings), run in this process with the options the check needs. The
"Use instead" scripts must be clean of every warning and error, not only of
their own code: they are what we tell users to write.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from run_helpers import codes, run_source

from torchwise.run.catalog import all_checks

CHECKS = all_checks()
#: the checks that need processes of their own are exercised in test_distributed/test_spawn
IN_PROCESS = sorted(code for code, c in CHECKS.items() if c.needs not in ("nproc", "spawn"))


def _options(code: str) -> dict[str, object]:
    return {"as_cuda": True} if CHECKS[code].needs == "as_cuda" else {}


@pytest.mark.parametrize("code", IN_PROCESS)
def test_example_trips_its_check(code: str, tmp_path: Path) -> None:
    result = run_source(tmp_path, CHECKS[code].example(), **_options(code))
    found = [f for f in result["findings"] if f["code"] == code]
    assert found, f"{code} not reported; got {codes(result)}"
    assert all(f["path"].endswith("script.py") for f in found)


@pytest.mark.parametrize("code", IN_PROCESS)
def test_use_instead_is_clean(code: str, tmp_path: Path) -> None:
    result = run_source(tmp_path, CHECKS[code].use_instead(), **_options(code))
    assert codes(result, serious=True) == []
    assert code not in codes(result)
