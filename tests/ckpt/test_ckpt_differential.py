"""The scanner against torch itself: every payload that runs under torch.load is unsafe.

torch.load(weights_only=False) runs in a child process (tests/ckpt/differential.py)
on files built here; each payload only creates a marker file in a temporary
directory. Two corpora: the hand-written tricks (tests/ckpt/tricks.py), and
opcode programs drawn by hypothesis (tests/ckpt/programs.py), where the scanner
must also agree with the C unpickler on *where* a pickle stops being readable.
The large generated run is ``bench/ckpt_differential.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from craft import build_zip, torch_entries
from differential import Case, marker_for, torch_outcomes, write_cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import Program, programs
from tricks import trick_cases

from torchwise.ckpt.loaders.routes import read_container
from torchwise.ckpt.scan import scan_file

pytestmark = pytest.mark.slow  # one child process that imports torch and loads every file


def test_every_trick_is_unsafe_and_torch_behaves_as_recorded(tmp_path: Path) -> None:
    cases, tricks = trick_cases(tmp_path)
    outcomes = torch_outcomes(tmp_path, write_cases(tmp_path, cases))
    ran = {name for name, outcome in outcomes.items() if outcome.ran}
    assert ran, "no payload ran at all: the harness is broken"
    for name, outcome in outcomes.items():
        assert outcome.ran == tricks[name].runs, (name, outcome.torch)
        result = scan_file(tmp_path / f"{name}.pt")
        assert result.verdict == "unsafe", (name, result.error, result.findings)


def generated_files(root: Path, batch: list[Program]) -> tuple[list[Case], dict[str, bool]]:
    """Each program as a plain pickle file or as a zip's data.pkl (alternating)."""
    cases, zipped = [], {}
    for index, program in enumerate(batch):
        name = f"program_{index:03d}"
        blob = program.render(str(marker_for(root, name)))
        zipped[name] = index % 2 == 1
        cases.append(Case(name, build_zip(torch_entries(blob)) if zipped[name] else blob))
    return cases, zipped


def check_batch(root: Path, batch: list[Program]) -> None:
    cases, _ = generated_files(root, batch)
    outcomes = torch_outcomes(root, write_cases(root, cases))
    for case, program in zip(cases, batch, strict=True):
        outcome, path = outcomes[case.name], root / f"{case.name}.pt"
        verdict = scan_file(path).verdict
        if outcome.ran:
            assert verdict == "unsafe", (case.name, program, outcome.torch)
        # Where decoding stops must match the C unpickler's: torch got through the
        # pickle exactly when the scanner saw it complete and torch-readable.
        data = read_container(path).data  # None: byte 0 starts no pickle at all
        if data is not None and any("FRAME" in a.message for a in data.result.anomalies):
            continue  # where C stops depends on its buffering: unsafe, and not comparable
        ours = data is not None and data.result.complete and data.result.torch_stop is None
        theirs = outcome.torch.startswith("loaded") or "Invalid magic number" in outcome.torch
        assert ours == theirs, (case.name, program, outcome.torch, data and data.result.stop)
        if not program.payload and not program.broken:
            assert verdict == "safe", (case.name, program)


@settings(max_examples=1, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(st.lists(programs(), min_size=32, max_size=32))
def test_generated_programs_agree_with_torch(tmp_path_factory: pytest.TempPathFactory,
                                             batch: list[Program]) -> None:  # fmt: skip
    check_batch(tmp_path_factory.mktemp("programs"), batch)
