"""The cross-rank judge on hand-made rank records (no processes): TWR603 from a timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchwise.findings import Finding, Severity
from torchwise.run.crossrank import judge
from torchwise.run.options import RunOptions

TIMEOUT = "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Timed out waiting 10000ms for recv"


def _rank(rank: int, crash: str | None = None, line: int = 0) -> dict[str, Any]:
    site = {"path": "train.py", "line": line, "column": 1}
    facts: dict[str, Any] = {"crash": {"site": site, "error": crash} if crash else None}
    return {"rank": rank, "facts": facts}


def _crash(message: str, line: int) -> Finding:
    return Finding(
        code="TWR001", message=f"the script raised {message}", path="train.py", line=line,
        column=1, end_line=line, end_column=1, severity=Severity.ERROR,
    )  # fmt: skip


def test_a_timeout_in_torchs_own_collective_is_a_collective_mismatch(tmp_path: Path) -> None:
    results = [_rank(0, TIMEOUT, line=221), _rank(1)]
    found = judge([_crash(TIMEOUT, 221)], results, tmp_path, RunOptions(), world=2,
                  timed_out=False)  # fmt: skip
    assert [(f.code, f.line) for f in found] == [("TWR603", 221)]
    assert "DDP" in found[0].message and "rank 1 finished" in found[0].message
    assert "Timed out" in found[0].data["then"]  # the crash is its evidence


def test_a_timeout_after_another_ranks_crash_is_that_crash(tmp_path: Path) -> None:
    results = [_rank(0, TIMEOUT, line=221), _rank(1, "ValueError: boom", line=40)]
    crashes = [_crash(TIMEOUT, 221), _crash("ValueError: boom", 40)]
    found = judge(crashes, results, tmp_path, RunOptions(), world=2, timed_out=False)
    assert "TWR603" not in [f.code for f in found]
    assert ("TWR001", 40) in [(f.code, f.line) for f in found]
