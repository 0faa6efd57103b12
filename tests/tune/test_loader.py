"""The user's DataLoader: loading it, splitting its batches, rebuilding it, scanning it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.tune.loader import (
    LoaderSettings,
    load_loader,
    split_batch,
    worker_candidates,
)
from torchwise.tune.loader_scan import _best, batches_per_sample, scan_loader
from torchwise.tune.session import ArmResult, SessionConfig, SessionResult
from torchwise.tune.stats import Comparison, Verdict

DATA = Path(__file__).parent / "loader_data.py"


def test_split_batch_understands_the_usual_shapes() -> None:
    x, y = torch.ones(2, 3), torch.zeros(2, dtype=torch.long)
    assert split_batch((x, y)).args[0] is x and split_batch((x, y)).target is y
    three = split_batch([x, x, y])
    assert len(three.args) == 2 and three.target is y
    as_dict = split_batch({"input_ids": x, "labels": y})
    assert as_dict.args == () and list(as_dict.kwargs) == ["input_ids"] and as_dict.target is y
    lone = split_batch(x)
    assert lone.args == (x,) and lone.target is None
    nested = split_batch(((x, x), y))
    assert len(nested.args) == 2
    with pytest.raises(TorchwiseError, match="tune understands"):
        split_batch("text")


def test_load_loader_and_rebuild_it_with_workers() -> None:
    source = load_loader(f"{DATA}:make_loader")
    assert source.user_settings == LoaderSettings(0, False, False, None)
    plain = [b for _, b in zip(range(8), iter(source.build(LoaderSettings())), strict=False)]
    workers = source.build(LoaderSettings(1, False, True, 2))
    assert workers.num_workers == 1 and workers.persistent_workers
    rebuilt = list(iter(workers))
    assert len(rebuilt) == len(plain) == 8
    assert all(torch.equal(a[0], b[0]) for a, b in zip(plain, rebuilt, strict=True))
    source.close()


def test_batches_cycle_through_epochs() -> None:
    source = load_loader(f"{DATA}:make_loader")
    batches = source.batches(None, torch.device("cpu"))
    seen = [next(batches) for _ in range(20)]  # 8 batches per epoch
    assert torch.equal(seen[0].args[0], seen[8].args[0])
    source.close()


@pytest.mark.parametrize(
    ("reference", "error", "message"),
    [
        (f"{DATA}:not_a_loader", TorchwiseError, "returned list, not a torch.utils.data"),
        (f"{DATA}:broken_loader", UserCodeError, "loader_data.py:"),
        (f"{DATA}:missing", TorchwiseError, "has no attribute 'missing'"),
        ("nowhere/data.py:make", TorchwiseError, "file not found"),
        ("data_without_function", TorchwiseError, "is not 'file.py:name'"),
    ],
)
def test_bad_loaders_are_one_clear_error(reference: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_loader(reference)


def test_worker_candidates() -> None:
    assert worker_candidates(2) == [0, 1, 2, 4]
    assert worker_candidates(1) == [0, 1, 2]
    assert worker_candidates(64)[-1] == 16


def test_scan_loader_measures_every_setting() -> None:
    source = load_loader(f"{DATA}:make_loader")
    config = SessionConfig(min_rounds=2, max_rounds=3, warmup_steps=1, budget_s=1.0)
    scan = scan_loader(source, torch.device("cpu"), config, cores=1)
    assert set(scan.results) >= {LoaderSettings(), LoaderSettings(1, False, True, None)}
    assert all(r.samples for r in scan.results.values())
    assert scan.best in scan.results


def _scan_session(ratios: dict[LoaderSettings, tuple[float, Verdict]]) -> SessionResult:
    """A finished loader session whose arms ended with the given (ratio, verdict)."""
    arms = {}
    for settings, (ratio, verdict) in ratios.items():
        result = ArmResult(settings.describe())
        result.comparison = Comparison(
            rounds=11,
            ratio=ratio,
            ci_low=ratio / 4,
            ci_high=ratio * 4 if verdict is Verdict.SAME else ratio * 1.01,
            confidence=0.99,
            p_value=0.5 if verdict is Verdict.SAME else 0.001,
            min_effect=0.05,
            verdict=verdict,
            settled=verdict is not Verdict.SAME,
            reason="synthetic",
        )
        arms[result.name] = result
    return SessionResult(ArmResult("user"), arms, 11, 1.0, "time budget", SessionConfig())


ONE, TWO, FOUR = (LoaderSettings(w, False, True, None) for w in (1, 2, 4))


def test_an_unresolved_but_much_faster_loader_setting_is_still_tried() -> None:
    # A loaded machine left every worker count's interval across 1; the step
    # trials, which time the whole step, must still get to try the best estimate
    # (before, the scan returned the user's settings and tune tried no loader).
    session = _scan_session({ONE: (0.9, Verdict.SAME), FOUR: (0.3, Verdict.SAME)})
    assert _best(session, [ONE, FOUR], LoaderSettings()) == FOUR


def test_a_significantly_faster_loader_setting_beats_a_promising_one() -> None:
    session = _scan_session({TWO: (0.5, Verdict.FASTER), FOUR: (0.3, Verdict.SAME)})
    assert _best(session, [TWO, FOUR], LoaderSettings()) == TWO


def test_no_loader_setting_is_passed_on_without_a_large_estimated_gain() -> None:
    session = _scan_session({ONE: (0.9, Verdict.SAME), TWO: (1.3, Verdict.SLOWER)})
    assert _best(session, [ONE, TWO], LoaderSettings()) == LoaderSettings()


def test_a_loader_sample_times_several_batches_per_worker() -> None:
    # However slow a batch, one batch after the untimed drain times the burst of
    # workers restarting in phase, not their rate: with 2 workers a sample must
    # hold at least 4 batches (a target sample this short calibrates to 1).
    source = load_loader(f"{DATA}:make_loader")
    config = SessionConfig(min_rounds=2, max_rounds=2, warmup_steps=1, target_sample_s=1e-9)
    scan = scan_loader(source, torch.device("cpu"), config, cores=1)
    first = scan.sessions[0]
    assert first.baseline.steps_per_sample == 4
    assert {a.steps_per_sample for a in first.arms.values()} == {4}
    assert batches_per_sample(LoaderSettings(), [LoaderSettings(4, False, True, 4)]) == 8
