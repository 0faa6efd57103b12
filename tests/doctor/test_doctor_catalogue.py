"""Every bug in the catalogue is caught by the check meant for it; clean models pass."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from torchwise.doctor import CHECK_IDS, Status, check

sys.path.insert(0, str(Path(__file__).parent))
from doctor_bugs import BUGGY, CLEAN, Case, build


def test_catalogue_is_broad() -> None:
    assert len(BUGGY) >= 20
    # every check except the informational ones has at least one bug it must catch
    assert {c.check for c in BUGGY} >= set(CHECK_IDS)


@pytest.mark.parametrize("case", BUGGY, ids=lambda c: c.name)
def test_bug_is_caught_by_its_check(case: Case) -> None:
    model, inputs = build(case)
    result = check(model, inputs, [case.check], **case.options)[case.check]
    assert result.status in (Status.FAIL, Status.WARN), result.summary
    assert result.causes and result.fix  # the user learns why and what to do


@pytest.mark.parametrize("case", CLEAN, ids=lambda c: c.name)
def test_clean_model_passes_every_check(case: Case) -> None:
    model, inputs = build(case)
    report = check(model, inputs, **case.options)
    flagged = [
        (r.id, r.status.value, r.summary) for r in report if r.status in (Status.FAIL, Status.WARN)
    ]
    assert flagged == []
    assert report.ok


@pytest.mark.slow
def test_example_project_model_is_healthy() -> None:
    root = Path(__file__).parents[2] / "examples" / "cifar_project"
    sys.path.insert(0, str(root))
    try:
        from model import CifarNet
    finally:
        sys.path.remove(str(root))
    torch.manual_seed(0)
    report = check(CifarNet(), torch.randn(8, 3, 32, 32))
    assert [r.id for r in report if r.status in (Status.FAIL, Status.WARN)] == []


@pytest.mark.parametrize(
    ("name", "check_id", "where"),
    [
        ("time-major-reshape", "batch-independence", "forward"),
        ("unused-layer", "grad-flow", "fc_extra.weight"),
        ("detached-branch", "grad-flow", "aux.weight"),
        ("functional-dropout", "eval-determinism", "forward"),
        ("log-of-negative", "nan-inf", "LogOfNegative"),
        ("fixed-device-tensor", "device-consistency", "FixedDeviceTensor"),
        ("plain-list-layers", "device-consistency", "blocks"),
        ("negative-bias", "dead-units", "NegativeBias"),
        ("frozen-by-accident", "param-update", "fc1"),
        ("missing-causal-mask", "causal-leak", "attn"),
    ],
)
def test_findings_name_the_place(name: str, check_id: str, where: str) -> None:
    case = next(c for c in BUGGY if c.name == name)
    model, inputs = build(case)
    result = check(model, inputs, [check_id], **case.options)[check_id]
    assert where in result.where, result.where
