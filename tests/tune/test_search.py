"""The greedy search: which knobs it accepts, in which order, and what it refuses.

Correctness checks run for real on a tiny model; the timing sessions are
replaced by synthetic ones whose true step time is a known function of the
settings, on a fake clock (no verdict here depends on wall time).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from torchwise.tune.knobs import Facts, available_knobs
from torchwise.tune.search import Search, SearchConfig
from torchwise.tune.session import Arm, SessionConfig, SessionResult, run_session
from torchwise.tune.step import StepSettings, Workload

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import NoisyMachine

#: True relative step time of each setting (multiplied together).
EFFECTS = {
    ("threads", 1): 0.5,
    ("channels_last", True): 0.8,
    ("autocast", "bf16"): 2.0,
    ("optimizer_impl", "fused"): 0.9,
    ("optimizer_impl", "foreach"): 1.0,
    ("set_to_none", False): 1.0,
}


def true_time(settings: StepSettings) -> float:
    seconds = 0.010
    for (field, value), factor in EFFECTS.items():
        if getattr(settings, field) == value:
            seconds *= factor
    return seconds


def synthetic_runner(seed: int = 0):  # type: ignore[no-untyped-def]
    calls: list[list[str]] = []

    def run(baseline: Arm, arms: list[Arm], config: SessionConfig) -> SessionResult:
        calls.append([a.name for a in arms])
        machine = NoisyMachine(seed=seed + len(calls), jitter=0.1, spike_p=0.02, max_load=1.5)
        fake = [machine.arm(a.name, true_time(a.info)) for a in arms]  # type: ignore[arg-type]
        base = machine.arm("baseline", true_time(baseline.info))  # type: ignore[arg-type]
        return run_session(base, fake, config, clock=machine.clock)

    return run, calls


def cpu_facts(workload: Workload) -> Facts:
    return Facts(
        device="cpu",
        cores=2,
        threads=2,
        has_conv=True,
        optimizer_name="torch.optim.AdamW",
        optimizer_args=frozenset({"foreach", "fused"}),
    )


def test_greedy_accepts_the_largest_gain_first_and_stacks_the_rest(cnn_workload: Workload) -> None:
    knobs, _ = available_knobs(cpu_facts(cnn_workload))
    runner, calls = synthetic_runner()
    search = Search(cnn_workload, knobs, SearchConfig(budget_s=1e9), runner=runner)
    result = search.run()
    accepted = [t.knob.id for t in result.accepted]
    # The thread count first (2x), then channels_last (1.25x), then fused (1.11x).
    assert accepted == ["threads-1", "channels-last", "fused-optimizer"]
    assert [t.on_top_of for t in result.accepted] == [
        (),
        ("threads-1",),
        ("threads-1", "channels-last"),
    ]
    assert calls[0] == ["threads-1"]  # alone: it changes every other knob's timing
    assert set(calls[1]) == {
        "channels-last",
        "bf16-autocast",
        "foreach-optimizer",
        "fused-optimizer",
        "zero-grad-in-place",
    }
    stage2 = {t.knob.id: t for t in result.stages[1].trials}
    assert stage2["bf16-autocast"].status == "slower"
    # Settled verdicts are not measured again; the fused optimizer (faster) is.
    assert "bf16-autocast" not in calls[2] and "fused-optimizer" in calls[2]
    assert "channels-last" not in calls[2]
    combined = result.combined
    assert combined is not None and result.confirmation is not None
    assert 0.30 < combined.ratio < 0.42  # 0.5 * 0.8 * 0.9 = 0.36


def test_a_group_gives_at_most_one_knob(cnn_workload: Workload) -> None:
    global EFFECTS
    saved = dict(EFFECTS)
    EFFECTS[("optimizer_impl", "foreach")] = 0.85  # now both optimizer knobs are faster
    try:
        knobs, _ = available_knobs(
            cpu_facts(cnn_workload), only=["foreach-optimizer", "fused-optimizer"]
        )
        runner, calls = synthetic_runner(seed=7)
        result = Search(cnn_workload, knobs, SearchConfig(budget_s=1e9), runner=runner).run()
    finally:
        EFFECTS.clear()
        EFFECTS.update(saved)
    assert [t.knob.id for t in result.accepted] == ["foreach-optimizer"]
    assert len(calls) == 1  # fused is in the same group: no second stage
    assert result.confirmation is None


def test_nothing_faster_means_no_recommendation(cnn_workload: Workload) -> None:
    knobs, _ = available_knobs(
        cpu_facts(cnn_workload), only=["bf16-autocast", "zero-grad-in-place"]
    )
    runner, _ = synthetic_runner(seed=3)
    result = Search(cnn_workload, knobs, SearchConfig(budget_s=1e9), runner=runner).run()
    assert result.accepted == [] and result.combined is None


def test_a_knob_that_fails_its_check_is_never_timed(cnn_workload: Workload) -> None:
    def exploding_backend(gm, example_inputs):  # type: ignore[no-untyped-def]
        raise RuntimeError("backend exploded")

    facts = Facts(
        **{
            **cpu_facts(cnn_workload).__dict__,
            "compile": True,
            "compile_backend": exploding_backend,
        }
    )  # type: ignore[arg-type]
    knobs, _ = available_knobs(facts, only=["compile", "threads-1"])
    runner, calls = synthetic_runner(seed=4)
    result = Search(cnn_workload, knobs, SearchConfig(budget_s=1e9), runner=runner).run()
    trial = next(t for s in result.stages for t in s.trials if t.knob.id == "compile")
    assert trial.status == "failed" and "backend exploded" in (trial.error or "")
    assert calls[0] == ["threads-1"]  # compile broke in its check: never timed
    assert all("compile" not in c for c in calls)
    torch.compiler.reset()
