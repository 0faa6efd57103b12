"""Training steps as session arms: the untimed settle and the sample length each arm needs.

Two rules shape how the search's sessions time real steps
(:func:`torchwise.tune.session.run_session` times whatever it is given):

- **Process-wide settings settle.** Changing the thread count between samples
  leaves the next steps slow for a while (OpenMP's spin-waiting pool resizes),
  whichever arm runs them. A session whose arms run different thread counts
  waits :data:`THREAD_SWITCH_SETTLE_S` of untimed steps before a sample that
  follows a switch, and its samples last at least as long: a short sample right
  after the settle would time what is left of the transient at full weight.
- **A DataLoader is timed at its rate, not its burst.** An arm whose loader has
  workers first drains its prefetch queue (batches made while other arms ran
  would time as speed), and its samples hold two batches per worker: right after
  the drain the workers are in phase, so one step times their burst or the wait
  after it. Arms on a 0-worker loader load each batch in their step and need
  neither.

The measurements behind both are in docs/benchmarks.md (tune's sessions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import torch

from torchwise.tune.memory import StepMemory, live_training_state, measure_step_memory
from torchwise.tune.session import Arm, SessionConfig
from torchwise.tune.step import StepSettings, TrainingStep, Workload


class Settle(NamedTuple):
    """Untimed work before each sample of a session: steps, and seconds of steps."""

    steps: int = 0
    seconds: float = 0.0


#: Untimed seconds before a sample that follows a thread-count switch.
THREAD_SWITCH_SETTLE_S = 0.1


def settle_for(settings: Sequence[StepSettings]) -> Settle:
    """The settle every arm of a session gets for the process-wide settings in it.

    Any process-wide setting (threads, TF32, cudnn.benchmark) costs the next step
    a switch: one untimed step for all. Seconds only where the arms really run
    different thread counts.
    """
    process_wide = any(s.threads is not None or s.tf32 or s.cudnn_benchmark for s in settings)
    counts = {s.threads or torch.get_num_threads() for s in settings}
    return Settle(int(process_wide), THREAD_SWITCH_SETTLE_S if len(counts) > 1 else 0.0)


def drain_steps(settings: StepSettings) -> int:
    """Untimed steps an arm's own loader needs before a sample: its prefetch queue, drained."""
    return settings.loader.queue_depth + 1 if settings.loader is not None else 0


def steps_per_loader_sample(workload: Workload, settings: Sequence[StepSettings]) -> list[int]:
    """The fewest steps in a sample of each arm, in a session where some arm changes the loader.

    Two batches per worker of the arm's own loader (its trial's, else the
    user's); one for an arm on a 0-worker loader (each step loads its own batch,
    so one step times the steady rate). The baseline samples paired with a loader
    arm are as long as the loader arm's
    (:func:`torchwise.tune.session.run_session` pairs equal lengths).
    """
    if not any(s.loader is not None for s in settings):
        return [1] * len(settings)
    user = workload.loader.user_settings if workload.loader is not None else None
    floors = []
    for s in settings:
        loader = s.loader or user
        floors.append(max(1, 2 * loader.num_workers) if loader is not None else 1)
    return floors


def session_config(
    base: SessionConfig, *, budget_s: float, seed: int, settle: Settle, futility: bool = False
) -> SessionConfig:
    """The session's config: samples at least as long as the settle's seconds."""
    return dataclasses.replace(
        base,
        budget_s=budget_s,
        seed=seed,
        futility=futility,
        target_sample_s=max(base.target_sample_s, settle.seconds),
    )


def _process_state(settings: StepSettings) -> tuple[int, bool, bool]:
    """What a step's scope sets process-wide: a sample after one in the same state
    follows no switch, so it needs no settle seconds (:attr:`Arm.process_state`)."""
    threads = settings.threads or torch.get_num_threads()
    return threads, settings.tf32, settings.cudnn_benchmark


def _arm(name: str, step: TrainingStep, settle: Settle, min_steps: int = 1) -> Arm:
    return Arm(
        name,
        step.run,
        step.scope,
        settle.steps,
        settle_s=settle.seconds,
        info=step.settings,
        min_steps_per_sample=min_steps,
        # Only a session that settles for seconds saves anything by knowing the state.
        process_state=_process_state(step.settings) if settle.seconds else None,
    )


def session_arms(
    workload: Workload, named: Sequence[tuple[str, TrainingStep]], settle: Settle
) -> tuple[Arm, list[Arm]]:
    """The baseline (first) and the other arms, each with its own loader floor and drain."""
    floors = steps_per_loader_sample(workload, [step.settings for _, step in named])
    arms = [
        _arm(
            name,
            step,
            settle._replace(steps=max(settle.steps, drain_steps(step.settings))),
            floor,
        )
        for (name, step), floor in zip(named, floors, strict=True)
    ]
    return arms[0], arms[1:]


def step_memory(step: TrainingStep) -> StepMemory | None:
    """One step's peak memory, or None when the probe fails (memory is evidence, not a gate)."""
    try:
        with step.scope():
            step.zero_grad()
            return measure_step_memory(
                step.step, step.device, lambda: live_training_state(step.module, step.optimizer)
            )
    except Exception:
        return None
