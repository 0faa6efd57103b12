"""The worker process that runs user code: results, errors, progress, time limit, stdout."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.isolation import JobCrashed, JobTimeout, run_isolated


def _work(value: int, progress: Any) -> dict[str, Any]:
    progress(1, 2, "half way")
    return {
        "value": value * 2,
        "cwd": os.getcwd(),
        "argv": sys.argv,
        "bytecode": sys.dont_write_bytecode,
        "stdout_is_stderr": os.path.samestat(os.fstat(1), os.fstat(2)),
    }


def _raise(kind: str, progress: Any) -> None:
    if kind == "torchwise":
        raise TorchwiseError("bad input")
    if kind == "exit":
        sys.exit(4)
    raise KeyError("boom")


def _sleep_forever(progress: Any) -> None:
    while True:
        time.sleep(0.1)


def _die(progress: Any) -> None:
    os._exit(7)


def test_result_progress_and_environment(tmp_path: Path) -> None:
    seen: list[tuple[float, float | None, str]] = []
    result = run_isolated(
        _work, (21,), cwd=tmp_path, timeout=120, what="work",
        on_progress=lambda *event: seen.append(event),
    )  # fmt: skip
    assert result["value"] == 42
    assert result["cwd"] == str(tmp_path) and result["bytecode"] is True
    assert len(result["argv"]) == 1  # the user's argparse never sees torchwise's arguments
    assert seen == [(1, 2, "half way")]
    # What user code prints cannot reach the parent's stdout (a report, an MCP stream).
    assert result["stdout_is_stderr"] is True


@pytest.mark.parametrize(
    ("kind", "error", "text"),
    [
        ("torchwise", TorchwiseError, "bad input"),
        ("exit", UserCodeError, "sys.exit(4)"),
        ("other", JobCrashed, "KeyError: 'boom'"),
    ],
)
def test_errors_come_back_as_torchwise_errors(
    tmp_path: Path, kind: str, error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)")):
        run_isolated(_raise, (kind,), cwd=tmp_path, timeout=120, what="work")


def test_a_job_past_its_time_limit_is_stopped(tmp_path: Path) -> None:
    with pytest.raises(JobTimeout, match="sleeping took longer than 3s"):
        run_isolated(_sleep_forever, (), cwd=tmp_path, timeout=3, what="sleeping")


def test_a_dying_job_is_reported(tmp_path: Path) -> None:
    with pytest.raises(JobCrashed, match="exit code 7"):
        run_isolated(_die, (), cwd=tmp_path, timeout=120, what="dying")
