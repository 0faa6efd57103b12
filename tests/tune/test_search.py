"""The greedy search: which knobs it accepts, in which order, and what it refuses.

Correctness checks run for real on a tiny model; the timing sessions are
replaced by synthetic ones whose true step time is a known function of the
settings, on a fake clock (no verdict here depends on wall time).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from torchwise.tune.arms import THREAD_SWITCH_SETTLE_S, steps_per_loader_sample
from torchwise.tune.knobs import Facts, Knob, available_knobs, loader_knob
from torchwise.tune.loader import LoaderSettings
from torchwise.tune.search import Search, SearchConfig, SearchState, stage_share
from torchwise.tune.session import (
    Arm,
    ArmResult,
    SessionConfig,
    SessionResult,
    first_round,
    run_session,
)
from torchwise.tune.stats import Comparison, Verdict
from torchwise.tune.step import StepSettings, Workload
from torchwise.tune.trials import Stage, Trial

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import FakeClock, NoisyMachine

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
        "bf16-autocast+channels-last",  # the pair an expert tries
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


def fake_arm(machine: NoisyMachine, arm: Arm, seconds: float) -> Arm:
    """A synthetic stand-in for ``arm``, with the settle steps and sample floor tune gave it."""
    fake = machine.arm(arm.name, seconds)
    return dataclasses.replace(
        fake,
        settle_steps=arm.settle_steps,
        settle_s=arm.settle_s,
        min_steps_per_sample=arm.min_steps_per_sample,
        info=arm.info,
    )


def loader_runner(seed: int = 0):  # type: ignore[no-untyped-def]
    """Sessions where a DataLoader setting makes the step 10% faster.

    The first session sees a machine so noisy that 11 rounds (its budget is spent
    at once) cannot decide; later ones a quiet machine. Each call records the arms
    timed and the steps per sample each one (and, as "baseline", the baseline) used.
    """
    calls: list[tuple[list[str], dict[str, int]]] = []

    def run(baseline: Arm, arms: list[Arm], config: SessionConfig) -> SessionResult:
        first = not calls
        machine = NoisyMachine(
            seed=seed + len(calls), jitter=1.0 if first else 0.05, spike_p=0.0, max_load=1.0
        )

        def seconds(arm: Arm) -> float:
            return 0.009 if arm.info.loader is not None else 0.010  # type: ignore[attr-defined]

        fake = [fake_arm(machine, a, seconds(a)) for a in arms]
        base = fake_arm(machine, baseline, seconds(baseline))
        if first:
            config = dataclasses.replace(config, budget_s=0.0)
        result = run_session(base, fake, config, clock=machine.clock)
        steps = {n: r.steps_per_sample for n, r in result.arms.items()}
        calls.append(
            ([a.name for a in arms], {**steps, "baseline": result.baseline.steps_per_sample})
        )
        return result

    return run, calls


def test_a_loader_sample_is_two_steps_per_worker_of_its_loader(
    cnn_workload: Workload,
) -> None:
    user = LoaderSettings()
    four = LoaderSettings(4, False, True, None)
    both = [StepSettings(), StepSettings(loader=four)]
    assert steps_per_loader_sample(cnn_workload, both) == [1, 8]
    assert steps_per_loader_sample(cnn_workload, [StepSettings(), StepSettings(threads=1)]) == [
        1,
        1,
    ]
    assert steps_per_loader_sample(cnn_workload, [StepSettings(loader=user)]) == [1]
    # On top of an accepted 4-worker loader every arm runs that loader: all need 8.
    on_four = [StepSettings(loader=four), StepSettings(loader=four, threads=1)]
    assert steps_per_loader_sample(cnn_workload, on_four) == [8, 8]

    runner, calls = loader_runner()
    Search(cnn_workload, [loader_knob(four, user)], SearchConfig(budget_s=1e9), runner=runner).run()
    # A synthetic step of 9 ms calibrates to 2 steps a sample; the loader asks for 8.
    assert all(steps["loader"] == 8 for _, steps in calls)


def test_a_loader_trial_undecided_after_its_stage_gets_more_rounds(cnn_workload: Workload) -> None:
    knob = loader_knob(LoaderSettings(4, False, True, None), LoaderSettings())
    runner, calls = loader_runner(seed=5)
    result = Search(cnn_workload, [knob], SearchConfig(budget_s=1e9), runner=runner).run()
    trial = result.stages[0].trials[0]
    first = result.stages[0].session
    assert first is not None and not first.arms["loader"].comparison.settled  # type: ignore[union-attr]
    assert [names for names, _ in calls] == [["loader"], ["loader"]]
    assert trial.result is not None and trial.result.samples  # the new session's verdict
    assert trial.comparison is not None and trial.comparison.settled
    assert trial.accepted and result.accepted == [trial]


def test_no_more_rounds_when_the_budget_cannot_hold_them(cnn_workload: Workload) -> None:
    knob = loader_knob(LoaderSettings(4, False, True, None), LoaderSettings())
    runner, calls = loader_runner(seed=5)
    # A clock that jumps 100 s a reading leaves no budget after the first session.
    ticks = iter(range(0, 10**6, 100))
    Search(
        cnn_workload,
        [knob],
        SearchConfig(budget_s=150),
        runner=runner,
        clock=lambda: float(next(ticks)),
    ).run()
    assert [names for names, _ in calls] == [["loader"]]


USER, FOUR = LoaderSettings(), LoaderSettings(4, False, True, None)


def slow_loader_time(settings: StepSettings) -> float:
    """A synthetic step of bench/tune_workloads.py's slow-loader MLP.

    10 ms of compute (a fused optimizer saves 10% of it); with 0 workers the
    step also waits for the 20 ms collate, while 4 workers deliver a batch every
    5 ms, behind the compute.
    """
    compute = 0.010 * (0.9 if settings.optimizer_impl == "fused" else 1.0)
    loader = settings.loader or USER
    if loader.num_workers == 0:
        return compute + 0.020
    return max(compute, 0.020 / loader.num_workers)


def slow_loader_runner(  # type: ignore[no-untyped-def]
    clock: FakeClock, *, session_wide_floor: bool = False, session_wide_drain: bool = False
):
    """Sessions on one shared fake clock, recording every SessionResult.

    ``session_wide_floor`` replays the old rule: every arm of a session, the
    baseline included, at least as many steps a sample as its most parallel loader needs.
    ``session_wide_drain`` replays the old settle: every arm as many untimed steps
    before a sample as the most parallel loader's drain.
    """
    sessions: list[SessionResult] = []

    def run(baseline: Arm, arms: list[Arm], config: SessionConfig) -> SessionResult:
        machine = NoisyMachine(
            seed=len(sessions), jitter=0.1, spike_p=0.02, max_load=1.5, clock=clock
        )
        fakes = [fake_arm(machine, a, slow_loader_time(a.info)) for a in [baseline, *arms]]  # type: ignore[arg-type]
        if session_wide_floor:
            floor = max(f.min_steps_per_sample for f in fakes)
            fakes = [dataclasses.replace(f, min_steps_per_sample=floor) for f in fakes]
        if session_wide_drain:
            drain = max(f.settle_steps for f in fakes)
            fakes = [dataclasses.replace(f, settle_steps=drain) for f in fakes]
        result = run_session(fakes[0], fakes[1:], config, clock=clock)
        sessions.append(result)
        return result

    return run, sessions


def slow_loader_knobs(workload: Workload) -> list[Knob]:
    """The loader trial and three compute knobs, as on the bench's MLP (no effect on
    this synthetic step but the fused optimizer's 10% of the compute)."""
    compute, _ = available_knobs(
        cpu_facts(workload), only=["foreach-optimizer", "fused-optimizer", "zero-grad-in-place"]
    )
    return [loader_knob(FOUR, USER), *compute]


COMPUTE = {"foreach-optimizer", "fused-optimizer", "zero-grad-in-place"}


def test_only_the_loader_arm_and_its_baseline_samples_get_the_loader_floor(
    cnn_workload: Workload,
) -> None:
    clock = FakeClock()
    runner, sessions = slow_loader_runner(clock)
    # A budget of 1 s: each stage runs its first look, and leaves the compute knobs open.
    knobs = slow_loader_knobs(cnn_workload)
    Search(cnn_workload, knobs, SearchConfig(budget_s=1.0), runner=runner, clock=clock).run()
    first = sessions[0]
    assert set(first.arms) == {"loader", *COMPUTE}
    # A 30 ms step calibrates to one step a sample (the target is 10 ms): the
    # compute arms keep it, paired with one-step baseline samples; only the
    # 4-worker loader arm, and the baseline samples beside it, take 8 steps.
    loader = first.arms["loader"]
    assert loader.steps_per_sample == 8 == loader.paired_steps
    assert first.baseline.steps_per_sample == 1
    for name in COMPUTE:
        assert first.arms[name].steps_per_sample == 1 == first.arms[name].paired_steps
    # Once the 4-worker loader is accepted every arm runs on it: all take 8 steps.
    second = sessions[1]
    assert set(second.arms) == COMPUTE
    assert second.baseline.steps_per_sample == 8
    assert {(a.steps_per_sample, a.paired_steps) for a in second.arms.values()} == {(8, 8)}


def test_a_loader_trial_undecided_beside_a_compute_trial_gets_a_session_of_its_own(
    cnn_workload: Workload,
) -> None:
    knobs = [k for k in slow_loader_knobs(cnn_workload) if k.id in ("loader", "fused-optimizer")]
    runner, calls = loader_runner(seed=5)
    result = Search(cnn_workload, knobs, SearchConfig(budget_s=1e9), runner=runner).run()
    names, steps = calls[0]
    assert sorted(names) == ["fused-optimizer", "loader"]
    assert steps["loader"] == 8 and steps["fused-optimizer"] == steps["baseline"] < 8
    first = result.stages[0].session
    assert first is not None and not first.arms["loader"].comparison.settled  # type: ignore[union-attr]
    # The follow-up times the loader trial alone, at 8 steps, its baseline too.
    assert calls[1] == (["loader"], {"loader": 8, "baseline": 8})
    trial = next(t for t in result.stages[0].trials if t.knob.id == "loader")
    assert trial.comparison is not None and trial.comparison.settled
    assert trial.result is not None and trial.result.paired_steps == 8
    assert trial.accepted


def simulated_tune(
    workload: Workload, *, session_wide_floor: bool, session_wide_drain: bool = True
) -> tuple[float, list[SessionResult], list[str]]:
    clock = FakeClock()
    runner, sessions = slow_loader_runner(
        clock, session_wide_floor=session_wide_floor, session_wide_drain=session_wide_drain
    )
    # A budget of 1 s leaves only what tune never cuts short: each stage's first
    # look (11 rounds), the part that made tune overrun its budget.
    knobs = slow_loader_knobs(workload)
    result = Search(workload, knobs, SearchConfig(budget_s=1.0), runner=runner, clock=clock).run()
    return clock.now, sessions, [t.knob.id for t in result.accepted]


def test_the_floor_for_the_loader_arm_alone_shortens_a_slow_loader_tune(
    cnn_workload: Workload,
) -> None:
    new_s, new, new_accepted = simulated_tune(cnn_workload, session_wide_floor=False)
    old_s, old, old_accepted = simulated_tune(cnn_workload, session_wide_floor=True)
    assert new_accepted == old_accepted == ["loader"]
    assert [s.rounds for s in new] == [s.rounds for s in old] == [11, 11]
    # (Both with the old drain: every arm 9 untimed steps a sample.)
    # The loader stage: a round was 7 samples of 8 steps (after 9 untimed settle
    # steps each); now 5 one-step samples for the three compute arms, and two of 8
    # for the loader arm and its baseline: 0.68 of the steps' time (0.70 here).
    assert new[0].elapsed_s < 0.75 * old[0].elapsed_s
    # On top of the 4-worker loader every arm needs the 8 steps, as before.
    assert {a.steps_per_sample for a in new[1].arms.values()} == {8}
    assert new_s < 0.85 * old_s


def test_only_sessions_that_switch_the_thread_count_settle_for_a_time(
    cnn_workload: Workload,
) -> None:
    # The default thread count tune starts from (the tests' fixture runs at one).
    torch.set_num_threads(2)
    runner, _ = synthetic_runner()
    seen: list[dict[str, tuple[int, float]]] = []
    states: list[dict[str, object]] = []
    futility: list[bool] = []
    sample_s: list[float] = []

    def recording(baseline: Arm, arms: list[Arm], config: SessionConfig) -> SessionResult:
        seen.append({a.name: (a.settle_steps, a.settle_s) for a in [baseline, *arms]})
        states.append({a.name: a.process_state for a in [baseline, *arms]})
        futility.append(config.futility)
        sample_s.append(config.target_sample_s)
        return runner(baseline, arms, config)  # type: ignore[no-any-return]

    knobs, _ = available_knobs(
        cpu_facts(cnn_workload), only=["threads-1", "channels-last", "fused-optimizer"]
    )
    Search(cnn_workload, knobs, SearchConfig(budget_s=1e9), runner=recording).run()
    # The thread stage switches between 2 threads and 1: 0.1 s of settle steps.
    assert seen[0] == {n: (1, THREAD_SWITCH_SETTLE_S) for n in ("baseline", "threads-1")}
    # On top of threads-1 every arm runs one thread: the one settle step, no time.
    assert all(v == (1, 0.0) for v in seen[1].values()), seen[1]
    # The combination against the original baseline switches again.
    assert set(seen[-1]) == {"baseline", "combined"}
    assert set(seen[-1].values()) == {(1, THREAD_SWITCH_SETTLE_S)}
    # Sessions that settle for seconds know each arm's state, to skip the seconds
    # between two samples in the same one; the others have no use for it.
    assert states[0] == {"baseline": (2, False, False), "threads-1": (1, False, False)}
    assert set(states[1].values()) == {None}
    # The stages stop arms that cannot be usefully faster; the confirmation,
    # whose interval the report promises, does not.
    assert futility[:-1] == [True] * (len(futility) - 1) and futility[-1] is False
    # A sample is at least as long as the settle before it, where there is one;
    # the other sessions keep the calibrated length.
    default = SessionConfig().target_sample_s
    assert sample_s[0] == sample_s[-1] == THREAD_SWITCH_SETTLE_S > default
    assert sample_s[1:-1] == [default] * (len(sample_s) - 2)


def diluted_time(settings: StepSettings) -> float:
    """A step whose 0-worker loader waits 20 ms on top of 5 ms of compute.

    The fused optimizer saves a fixed 0.5 ms of the compute: 2% of the 25 ms
    loader-bound step, 10% of the 5 ms step once 4 workers hide the wait.
    ``zero_grad(set_to_none=False)`` does nothing.
    """
    compute = 0.005 - (0.0005 if settings.optimizer_impl == "fused" else 0.0)
    loader = settings.loader or USER
    return compute + (0.020 if loader.num_workers == 0 else 0.0)


def diluted_runner(  # type: ignore[no-untyped-def]
    clock: FakeClock,
    step_time: Callable[[StepSettings], float] = diluted_time,
    jitter: float = 0.03,
):
    """Sessions on a synthetic machine whose step takes ``step_time(settings)``."""
    sessions: list[SessionResult] = []

    def run(baseline: Arm, arms: list[Arm], config: SessionConfig) -> SessionResult:
        machine = NoisyMachine(
            seed=len(sessions), jitter=jitter, spike_p=0.0, max_load=1.0, clock=clock
        )
        fakes = [fake_arm(machine, a, step_time(a.info)) for a in [baseline, *arms]]  # type: ignore[arg-type]
        result = run_session(fakes[0], fakes[1:], config, clock=clock)
        sessions.append(result)
        return result

    return run, sessions


def diluted_search(workload: Workload, budget_s: float) -> tuple[Search, list[SessionResult]]:
    knobs, _ = available_knobs(cpu_facts(workload), only=["fused-optimizer", "zero-grad-in-place"])
    clock = FakeClock()
    runner, sessions = diluted_runner(clock)
    search = Search(
        workload,
        [loader_knob(FOUR, USER), *knobs],
        SearchConfig(budget_s=budget_s),
        runner=runner,
        clock=clock,
    )
    return search, sessions


def test_a_saving_diluted_by_a_bottleneck_is_measured_again_once_it_is_removed(
    cnn_workload: Workload,
) -> None:
    search, _ = diluted_search(cnn_workload, 60.0)
    result = search.run()
    first = {t.knob.id: t for t in result.stages[0].trials}
    fused = first["fused-optimizer"].comparison
    # On the 25 ms loader-bound step the fused optimizer's 2% is settled as nothing.
    assert fused is not None and fused.settled and fused.verdict is Verdict.SAME, fused
    assert first["loader"].accepted
    # Its interval still allows about 2 ms a step (1 - 0.92 of 25 ms): 40% of the
    # 5 ms step the loader leaves, over the 9% the settling rule ruled out. It is
    # measured again, on top of the loader.
    second = {t.knob.id: t for t in result.stages[1].trials}
    assert "fused-optimizer" in second
    assert "ms step with loader" in (second["fused-optimizer"].reopened or "")
    assert [t.knob.id for t in result.accepted] == ["loader", "fused-optimizer"]
    assert result.accepted[1].on_top_of == ("loader",)
    # With budget to spare, the two are confirmed together against the baseline.
    assert result.combined is not None and result.combined_not_measured is None


def test_a_knob_with_no_effect_is_not_reopened_again_and_again(cnn_workload: Workload) -> None:
    search, sessions = diluted_search(cnn_workload, 60.0)
    result = search.run()
    measured = [t for s in result.stages for t in s.trials if t.knob.id == "zero-grad-in-place"]
    # Settled as nothing on the 25 ms step, its interval allowed a useful share of
    # the 5 ms one: measured again there (beside the fused optimizer), settled tight
    # around 1 on that step, and not reopened when the fused optimizer, accepted in
    # that stage, took the step from 5 to 4.5 ms: no third stage.
    # It is measured once more on top of the fused optimizer, which changes the
    # same part of the step (the update that reads the gradients zero_grad
    # leaves), and stays settled: three stages, not more.
    assert len(measured) == 3 and all(t.reopened is not None for t in measured[1:])
    assert "same part of the step" in (measured[2].reopened or "")
    assert all(t.status == "no significant difference" for t in measured)
    assert measured[-1].comparison is not None and measured[-1].comparison.settled
    assert len(result.stages) == 3 and len(sessions) == 4  # three stages and the confirmation
    assert result.elapsed_s < 60.0


def interacting_time(settings: StepSettings) -> float:
    """A 10 ms step where the fused optimizer saves 1 ms, in-place zero_grad
    nothing alone but 1 ms more with the fused optimizer, channels_last nothing."""
    fused = settings.optimizer_impl == "fused"
    in_place = settings.set_to_none is False
    return 0.010 - (0.001 if fused else 0.0) - (0.001 if fused and in_place else 0.0)


def test_knobs_of_the_same_phase_are_measured_again_on_top_of_each_other(
    cnn_workload: Workload,
) -> None:
    clock = FakeClock()
    run, _ = diluted_runner(clock, interacting_time, jitter=0.02)
    knobs, _ = available_knobs(
        cpu_facts(cnn_workload),
        only=["fused-optimizer", "zero-grad-in-place", "channels-last"],
    )
    result = Search(cnn_workload, knobs, SearchConfig(budget_s=60.0), runner=run, clock=clock).run()
    first = {t.knob.id: t for t in result.stages[0].trials}
    assert first["zero-grad-in-place"].status == "no significant difference"
    assert first["channels-last"].status == "no significant difference"
    # zero_grad is reopened because it shares the optimizer phase with the fused
    # optimizer; channels_last, which saves nothing anywhere, is not.
    second = {t.knob.id for t in result.stages[1].trials}
    assert second == {"zero-grad-in-place"}
    assert [t.knob.id for t in result.accepted] == ["fused-optimizer", "zero-grad-in-place"]


def test_reopening_stays_within_the_stages_and_the_budget(cnn_workload: Workload) -> None:
    # With 1 s for all the timing, every stage runs its first look only, and the
    # reopened knobs still get theirs: no more stages than before, bounded time.
    search, sessions = diluted_search(cnn_workload, 1.0)
    result = search.run()
    assert len(result.stages) <= search.config.max_stages
    *stages, confirmation = sessions
    assert all(s.rounds == first_round(s.config) for s in stages)
    # The loader and then the fused optimizer were accepted, and the budget is
    # spent: the confirmation, whose first look would take seconds more, runs
    # only its warm-up, and the report is told why.
    assert [t.knob.id for t in result.accepted] == ["loader", "fused-optimizer"]
    assert confirmation is result.confirmation and confirmation.rounds == 0
    assert all(arm.samples == {} for arm in confirmation.arms.values())
    assert confirmation.elapsed_s < stages[-1].elapsed_s / stages[-1].rounds
    assert result.combined is None
    assert "s of budget it had" in (result.combined_not_measured or "")


def test_only_an_arm_with_loader_workers_drains_a_queue_before_its_samples(
    cnn_workload: Workload,
) -> None:
    new_s, new, new_accepted = simulated_tune(
        cnn_workload, session_wide_floor=False, session_wide_drain=False
    )
    old_s, old, old_accepted = simulated_tune(cnn_workload, session_wide_floor=False)
    assert new_accepted == old_accepted == ["loader"]
    first = new[0]
    # The 4-worker loader arm drains its queue (8 batches) and one more step; the
    # baseline and the compute arms, on the 0-worker loader, have no queue.
    assert first.arms["loader"].settle_steps == 9
    assert first.baseline.settle_steps == 0
    assert {first.arms[n].settle_steps for n in COMPUTE} == {0}
    # On top of the 4-worker loader every arm has the queue, and drains it.
    assert {a.settle_steps for a in new[1].arms.values()} | {new[1].baseline.settle_steps} == {9}
    # The loader stage's first look took 0.29 of the time the common drain took
    # (each compute sample was 9 untimed steps and 1 timed); the whole run 0.48.
    assert new[0].elapsed_s < 0.35 * old[0].elapsed_s
    assert new_s < 0.6 * old_s


def test_the_thread_stage_gets_its_knobs_share_of_the_budget(cnn_workload: Workload) -> None:
    runner, _ = synthetic_runner()
    budgets: list[tuple[list[str], float]] = []

    def recording(baseline: Arm, arms: list[Arm], config: SessionConfig) -> SessionResult:
        budgets.append(([a.name for a in arms], config.budget_s))
        return runner(baseline, arms, config)  # type: ignore[no-any-return]

    def share_of_first_stage(only: list[str]) -> float:
        budgets.clear()
        knobs, _ = available_knobs(
            cpu_facts(cnn_workload), only=only, skip=["bf16-autocast+channels-last"]
        )
        # The search's own clock stands still: every stage sees the whole budget left.
        config = SearchConfig(budget_s=60.0)
        Search(cnn_workload, knobs, config, runner=recording, clock=FakeClock()).run()
        assert budgets[0][0] == ["threads-1"]
        return budgets[0][1] / 60.0

    six = ["threads-1", "channels-last", "bf16-autocast", "foreach-optimizer"]
    six += ["fused-optimizer", "zero-grad-in-place"]
    # One thread knob of six pending: a sixth. The next stage, all the rest: 60%.
    assert share_of_first_stage(six) == 1 / 6
    assert budgets[1][1] == 0.6 * 60.0
    # Never above 35% (one of two), 60% alone, never below 15% (one of eight).
    assert share_of_first_stage(["threads-1", "fused-optimizer"]) == 0.35
    assert share_of_first_stage(["threads-1"]) == 0.6
    knobs, _ = available_knobs(cpu_facts(cnn_workload), only=six)
    assert stage_share(knobs[:1], knobs[:1] + 7 * knobs[1:2]) == 0.15


def contended_time(settings: StepSettings) -> float:
    """A step whose loader workers compete with its two threads for the cores.

    5 ms of compute on two threads, 5.5 ms on one; with 0 workers the step also
    waits 20 ms for its batch. Four workers hide the wait but take cores from
    the step's threads: two threads then need 8 ms, one still 5.5 ms.
    """
    workers = settings.loader.num_workers if settings.loader is not None else 0
    if settings.threads == 1:
        compute = 0.0055
    else:
        compute = 0.008 if workers else 0.005
    return compute + (0.0 if workers else 0.020)


def test_the_thread_count_is_measured_again_once_loader_workers_compete_for_the_cores(
    cnn_workload: Workload,
) -> None:
    clock = FakeClock()
    run, _ = diluted_runner(clock, contended_time, jitter=0.02)
    threads, _ = available_knobs(cpu_facts(cnn_workload), only=["threads-1"])
    knobs = [*threads, loader_knob(FOUR, USER)]
    result = Search(cnn_workload, knobs, SearchConfig(budget_s=60.0), runner=run, clock=clock).run()
    first = result.stages[0].trials[0]
    # Alone, one thread is 2% slower: no reason to take it.
    assert first.knob.id == "threads-1" and not first.accepted
    assert result.stages[1].trials[0].accepted  # the loader
    # On top of the loader, alone again (it changes every other knob's timing),
    # one thread is 0.69 of two: taken, and the report says why it was measured again.
    again = result.stages[2].trials
    assert [t.knob.id for t in again] == ["threads-1"] and again[0].on_top_of == ("loader",)
    assert "4 worker process(es) share the machine's" in (again[0].reopened or "")
    assert [t.knob.id for t in result.accepted] == ["loader", "threads-1"]
    # Once: a thread count measured on top of the loader is not reopened again.
    assert len(result.stages) == 3


def test_the_thread_count_is_not_measured_again_without_added_workers(
    cnn_workload: Workload,
) -> None:
    def fused_saves_a_fifth(settings: StepSettings) -> float:
        return contended_time(settings) * (0.8 if settings.optimizer_impl == "fused" else 1.0)

    clock = FakeClock()
    run, _ = diluted_runner(clock, fused_saves_a_fifth, jitter=0.02)
    knobs, _ = available_knobs(cpu_facts(cnn_workload), only=["threads-1", "fused-optimizer"])
    result = Search(cnn_workload, knobs, SearchConfig(budget_s=60.0), runner=run, clock=clock).run()
    # An accepted knob that starts no process leaves the thread count's verdict standing.
    assert [t.knob.id for t in result.accepted] == ["fused-optimizer"]
    measured = [t.knob.id for s in result.stages for t in s.trials]
    assert measured.count("threads-1") == 1


def test_a_knob_that_gains_only_with_autocast_is_measured_again_once_autocast_is_accepted(
    cnn_workload: Workload,
) -> None:
    """channels_last on a GPU: no gain in fp32, a large one in bf16 (NHWC tensor cores)."""
    global EFFECTS
    saved = dict(EFFECTS)
    EFFECTS.clear()
    EFFECTS.update({("autocast", "bf16"): 0.45, ("channels_last", True): 1.15})

    def time_with_interaction(settings: StepSettings) -> float:
        base = true_time(settings)
        both = settings.autocast == "bf16" and settings.channels_last
        return base * (0.7 / 1.15 if both else 1.0)  # with bf16: 0.7x, not 1.15x

    calls: list[list[str]] = []

    def runner(baseline: Arm, arms: list[Arm], config: SessionConfig) -> SessionResult:
        calls.append([a.name for a in arms])
        machine = NoisyMachine(seed=len(calls), jitter=0.05, spike_p=0.01, max_load=1.2)
        fake = [machine.arm(a.name, time_with_interaction(a.info)) for a in arms]  # type: ignore[arg-type]
        base = machine.arm("baseline", time_with_interaction(baseline.info))  # type: ignore[arg-type]
        return run_session(base, fake, config, clock=machine.clock)

    try:
        knobs, _ = available_knobs(
            cpu_facts(cnn_workload),
            only=["bf16-autocast", "channels-last"],
            skip=["bf16-autocast+channels-last"],  # here: the reopening alone
        )
        result = Search(cnn_workload, knobs, SearchConfig(budget_s=1e9), runner=runner).run()
        pair_knobs, _ = available_knobs(
            cpu_facts(cnn_workload), only=["bf16-autocast", "channels-last"]
        )
        EFFECTS[("autocast", "bf16")] = 1.1  # now bf16 alone is slower too
        paired = Search(cnn_workload, pair_knobs, SearchConfig(budget_s=1e9), runner=runner).run()
    finally:
        EFFECTS.clear()
        EFFECTS.update(saved)
    # neither alone gains, the pair does: the pair trial finds it
    assert [t.knob.id for t in paired.accepted] == ["bf16-autocast+channels-last"]
    first = {t.knob.id: t for t in result.stages[0].trials}
    assert first["channels-last"].status == "slower"  # alone, in fp32
    assert [t.knob.id for t in result.accepted] == ["bf16-autocast", "channels-last"]
    again = result.accepted[1]
    assert again.reopened is not None and "gains with autocast" in again.reopened


def test_compile_is_measured_last_on_top_of_what_was_accepted(cnn_workload: Workload) -> None:
    facts = dataclasses.replace(cpu_facts(cnn_workload), compile=True)
    knobs, _ = available_knobs(facts, only=["compile", "channels-last", "fused-optimizer"])
    runner, calls = synthetic_runner(seed=2)
    search = Search(cnn_workload, knobs, SearchConfig(budget_s=1e9), runner=runner)

    def prepare(knob, incumbent, stage):  # type: ignore[no-untyped-def]
        if knob.id == "compile":  # no real compile in a unit test: record, do not time
            from torchwise.tune.trials import Trial

            return Trial(knob, stage, tuple(k.id for k in incumbent)), None
        return Search._prepare(search, knob, incumbent, stage)

    search._prepare = prepare  # type: ignore[method-assign]
    result = search.run()
    compile_trial = next(t for s in result.stages for t in s.trials if t.knob.id == "compile")
    assert compile_trial.stage == len(result.stages)  # the last stage, alone
    assert set(compile_trial.on_top_of) == {t.knob.id for t in result.accepted}
    assert all("compile" not in c for c in calls)


def _winner(knob: Knob, ratio: float, low: float, high: float) -> Trial:
    comparison = Comparison(
        rounds=11, ratio=ratio, ci_low=low, ci_high=high, confidence=0.99, p_value=1e-4,
        min_effect=0.05, verdict=Verdict.FASTER, settled=True, reason="faster",
    )  # fmt: skip
    return Trial(knob, 1, (), result=ArmResult(knob.id, comparison=comparison))


def test_a_tie_the_noise_decides_goes_to_the_knob_that_constrains_less() -> None:
    bf16 = Knob("bf16-autocast", "bf16", "precision", {"autocast": "bf16"})
    fp16 = Knob("fp16-autocast", "fp16", "precision", {"autocast": "fp16", "grad_scaler": True})
    state = SearchState(pending=[bf16, fp16])
    # GPT-2 on an H200: fp16 2.80x, bf16 2.75x, intervals overlapping: bf16 (no GradScaler)
    tie = Stage(1, (), None, [_winner(fp16, 0.357, 0.32, 0.39), _winner(bf16, 0.364, 0.31, 0.42)])
    best = state.best_of(tie)
    assert best is not None and best.knob is bf16
    # A clear gap is not a tie: the faster knob wins whatever it constrains.
    gap = Stage(1, (), None, [_winner(fp16, 0.30, 0.28, 0.32), _winner(bf16, 0.40, 0.37, 0.43)])
    best = state.best_of(gap)
    assert best is not None and best.knob is fp16
