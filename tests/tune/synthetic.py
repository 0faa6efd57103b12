"""Synthetic timing sources: a fake clock and training "steps" that only advance it.

A :class:`NoisyMachine` models what a shared 2-core box does to timings, so the
statistics can be tested deterministically and at scale:

- per-step jitter: multiplicative log-normal noise (``jitter`` = its sigma);
- pre-emption: with probability ``spike_p`` a step takes 2x-5x as long;
- load drift: a machine-wide slowdown factor in [1, ``max_load``] that jumps to a
  new level every 0.1-2 simulated seconds (another job starting or ending),
  affecting every arm alike.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from torchwise.tune.session import Arm


@dataclass
class FakeClock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class NoisyMachine:
    seed: int = 0
    jitter: float = 0.15
    spike_p: float = 0.05
    max_load: float = 2.5
    clock: FakeClock = field(default_factory=FakeClock)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._load = 1.0
        self._next_change = 0.0

    def load(self) -> float:
        if self.clock.now >= self._next_change:
            self._load = self.rng.uniform(1.0, self.max_load)
            self._next_change = self.clock.now + self.rng.uniform(0.1, 2.0)
        return self._load

    def step_seconds(self, base_s: float) -> float:
        seconds = base_s * self.load() * math.exp(self.rng.gauss(0.0, self.jitter))
        if self.rng.random() < self.spike_p:
            seconds *= self.rng.uniform(2.0, 5.0)
        return seconds

    def arm(self, name: str, base_s: float, *, first_step_s: float | None = None) -> Arm:
        """An arm whose steps take ``base_s`` on an idle machine."""
        state = {"steps": 0}

        def run(steps: int) -> None:
            for _ in range(steps):
                if state["steps"] == 0 and first_step_s is not None:
                    self.clock.advance(first_step_s)
                else:
                    self.clock.advance(self.step_seconds(base_s))
                state["steps"] += 1

        return Arm(name, run)

    def failing_arm(self, name: str, *, after_steps: int = 0) -> Arm:
        state = {"steps": 0}

        def run(steps: int) -> None:
            for _ in range(steps):
                if state["steps"] >= after_steps:
                    raise RuntimeError(f"{name} broke the step")
                self.clock.advance(0.01)
                state["steps"] += 1

        return Arm(name, run)


@dataclass
class ThreadSwitchMachine(NoisyMachine):
    """A :class:`NoisyMachine` whose multi-threaded steps are slow just after a switch.

    Models what bench/tune_threads_ab.py measured on the 2-core development machine:
    steps at two threads within ``transient_s`` of running at one thread (OpenMP's
    spin-waiting pool coming back) take ``penalty`` times as long; steady 2-thread
    steps and 1-thread steps do not. Both thread counts have the same steady time.
    """

    transient_s: float = 0.075
    penalty: float = 1.4

    def __post_init__(self) -> None:
        super().__post_init__()
        self._threads = 2
        self._switched_at = -math.inf

    def threads_arm(self, name: str, base_s: float, threads: int) -> Arm:
        def run(steps: int) -> None:
            for _ in range(steps):
                if threads > 1 and self._threads == 1:
                    self._switched_at = self.clock.now
                self._threads = threads
                seconds = self.step_seconds(base_s)
                if threads > 1 and self.clock.now - self._switched_at < self.transient_s:
                    seconds *= self.penalty
                self.clock.advance(seconds)

        return Arm(name, run, info=threads)
