"""Trials are real steps on private copies, and a knob that breaks the step is caught."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch

from torchwise.tune.checkpointing import apply_checkpointing, find_blocks
from torchwise.tune.oracle import Oracle
from torchwise.tune.step import (
    CompileTimeout,
    StepSettings,
    TrainingStep,
    Workload,
    global_settings,
    time_limit,
)


def state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_training_steps_leave_the_users_model_alone(cnn_workload: Workload) -> None:
    before = state(cnn_workload.model)
    for settings in (StepSettings(), StepSettings(channels_last=True, optimizer_impl="fused")):
        TrainingStep(cnn_workload, settings).run(3)
    after = state(cnn_workload.model)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in cnn_workload.model.parameters())
    assert next(cnn_workload.model.parameters()).is_contiguous()


def test_a_step_really_trains_its_copy(mlp_workload: Workload) -> None:
    step = TrainingStep(mlp_workload)
    first = float(step.step())
    for _ in range(20):
        last = float(step.step())
    assert last < first


def test_global_settings_are_restored() -> None:
    threads = torch.get_num_threads()
    with global_settings(StepSettings(threads=1), torch.device("cpu")):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == threads


def test_checkpointing_finds_the_repeated_blocks_and_keeps_the_math(mlp_workload: Workload) -> None:
    description, names = find_blocks(mlp_workload.model)
    assert description == "3 Block blocks" and names == ["blocks.0", "blocks.1", "blocks.2"]
    result = Oracle(mlp_workload).judge(
        TrainingStep(mlp_workload, StepSettings(checkpointing=True))
    )
    assert result.ok, result.summary()


def test_checkpointing_falls_back_to_a_sequential(cnn_workload: Workload) -> None:
    seq = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    description, names = find_blocks(seq)
    assert names == ["0", "2"] and "Sequential" in description
    assert apply_checkpointing(seq) == ["0", "2"]
    assert find_blocks(cnn_workload.model) == ("", [])


def test_a_failing_compile_backend_raises_at_the_first_step(mlp_workload: Workload) -> None:
    def exploding_backend(gm, example_inputs):  # type: ignore[no-untyped-def]
        raise RuntimeError("backend exploded")

    settings = StepSettings(compile=True, compile_backend=exploding_backend)  # type: ignore[arg-type]
    step = TrainingStep(mlp_workload, settings)
    with pytest.raises(Exception, match="backend exploded"):
        step.run(1)
    torch.compiler.reset()


def test_time_limit_interrupts_a_long_block() -> None:
    started = time.perf_counter()
    with pytest.raises(CompileTimeout, match="budget"), time_limit(0.2, "torch.compile"):
        while time.perf_counter() - started < 30:
            pass
    with time_limit(None, "unbounded"):
        pass


def test_settings_merge_without_touching_the_original() -> None:
    base = StepSettings()
    merged = base.merged(threads=1)
    assert merged.threads == 1 and base.threads is None
    assert dataclasses.replace(merged, threads=None) == base
