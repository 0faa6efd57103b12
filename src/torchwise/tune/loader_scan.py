"""How fast can the user's DataLoader go, and is the training step waiting for it?

The loader alone is timed under other settings, interleaved with the user's own
settings as the baseline: one "step" is fetching one batch (and, on CUDA, copying
it to the device). Worker processes keep prefetching while another arm runs, so
each sample first drains the prefetch queue untimed (``queue_depth + 1`` batches)
and then times batches delivered in steady state. A sample is at least two
batches per worker of the most parallel setting in the session: the drain leaves
the workers in phase, so the next few batches arrive together, and a one-batch
sample would time that burst rather than the rate at which the workers deliver.

Stage A varies ``num_workers`` (0, 1, 2, 4, ... up to twice the cores, with
``persistent_workers=True`` so an epoch boundary does not restart workers);
stage B tries ``prefetch_factor=4`` and, on CUDA, ``pin_memory=True`` for the best
worker count. The best setting is the significantly fastest one; when the loader's
own noise leaves every setting unresolved, one whose estimate is at least 1.25x
faster is still passed on: the step trials, which time the whole step, decide.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from torchwise.tensortree import map_tensors
from torchwise.tune.loader import LoaderSettings, LoaderSource, worker_candidates
from torchwise.tune.session import Arm, ArmResult, SessionConfig, SessionResult, run_session
from torchwise.tune.stats import Verdict


@dataclass
class LoaderScan:
    user: LoaderSettings
    best: LoaderSettings
    sessions: list[SessionResult]
    #: settings -> its measurements (the user's settings under the first session's baseline)
    results: dict[LoaderSettings, ArmResult]

    def seconds_per_batch(self, settings: LoaderSettings) -> float:
        return self.results[settings].median_s

    @property
    def speedup(self) -> float:
        if self.best == self.user:
            return 1.0
        comparison = self.results[self.best].comparison
        return comparison.speedup if comparison is not None else 1.0


def _fetch_arm(
    name: str, source: LoaderSource, settings: LoaderSettings, device: torch.device
) -> Arm:
    def run(steps: int) -> None:
        for _ in range(steps):
            batch = source.next_raw(settings)
            if device.type == "cuda":
                map_tensors(batch, lambda t: t.to(device, non_blocking=settings.pin_memory))
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return Arm(name, run, settle_steps=settings.queue_depth + 1)


def _session(
    source: LoaderSource,
    baseline: LoaderSettings,
    candidates: list[LoaderSettings],
    device: torch.device,
    config: SessionConfig,
) -> SessionResult:
    arms = [_fetch_arm(c.describe(), source, c, device) for c in candidates]
    batches = batches_per_sample(baseline, candidates)
    config = dataclasses.replace(config, min_steps_per_sample=batches)
    return run_session(_fetch_arm("user", source, baseline, device), arms, config)


def batches_per_sample(baseline: LoaderSettings, candidates: list[LoaderSettings]) -> int:
    """The fewest batches in one sample: two per worker of the most parallel setting."""
    return max(1, 2 * max(s.num_workers for s in [baseline, *candidates]))


#: A loader setting whose scan left it unresolved but whose estimate is at least
#: this much faster is still tried in the step trials, which settle it there.
PROMISING = 1.25


def _best(
    session: SessionResult, candidates: list[LoaderSettings], current: LoaderSettings
) -> LoaderSettings:
    """The significantly fastest setting; else the most promising one (module doc)."""
    best, best_ratio = current, 1.0
    promising, promising_ratio = current, 1 / PROMISING
    for settings in candidates:
        comparison = session.arms[settings.describe()].comparison
        if comparison is None:
            continue
        if comparison.verdict is Verdict.FASTER and comparison.ratio < best_ratio:
            best, best_ratio = settings, comparison.ratio
        elif comparison.verdict is not Verdict.SLOWER and comparison.ratio < promising_ratio:
            promising, promising_ratio = settings, comparison.ratio
    return best if best != current else promising


def scan_loader(
    source: LoaderSource,
    device: torch.device,
    config: SessionConfig,
    *,
    cores: int | None = None,
) -> LoaderScan:
    """Time the loader under other settings (see the module docstring)."""
    user = source.user_settings
    stage_a = [
        LoaderSettings(w, user.pin_memory, w > 0, None)
        for w in worker_candidates(cores)
        if LoaderSettings(w, user.pin_memory, w > 0, None) != user
    ]
    half = dataclasses.replace(config, budget_s=config.budget_s * 0.6)
    first = _session(source, user, stage_a, device, half)
    results = {s: first.arms[s.describe()] for s in stage_a}
    results[user] = first.baseline
    sessions = [first]
    best = _best(first, stage_a, user)
    if best.num_workers > 0:
        stage_b = [dataclasses.replace(best, prefetch_factor=4)]
        if device.type == "cuda" and not best.pin_memory:
            stage_b.append(dataclasses.replace(best, pin_memory=True))
        rest = dataclasses.replace(config, budget_s=config.budget_s * 0.4, seed=config.seed + 1)
        second = _session(source, user, stage_b, device, rest)
        sessions.append(second)
        for settings in stage_b:
            results[settings] = second.arms[settings.describe()]
        challenger = _best(second, stage_b, user)
        if challenger != user:
            a, b = results[challenger].comparison, results[best].comparison
            if a is not None and b is not None and a.ratio < b.ratio / 1.05:
                best = challenger
    source.close()
    return LoaderScan(user, best, sessions, results)
