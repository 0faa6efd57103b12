"""Calibrate the per-look error rate of tune's sequential signed-rank test.

tune tests each arm at the rounds of a geometric schedule (11, 13, 16, ... 150) and
stops at the first significant look. Testing many times inflates the error, so each
look runs at a stricter level; this script finds the largest per-look level at which a
null arm (no effect) is declared different at most 1% of the time over all the looks,
plus one more at a budget stop. Under the null the signed-rank statistic depends only
on random signs of the ranks, so Gaussian differences stand for any continuous
symmetric noise: the result is distribution-free.

    python bench/tune_calibrate.py [--sequences 100000]

The level found is stored in torchwise.tune.session.CALIBRATED_LOOK_ALPHA.
"""

from __future__ import annotations

import argparse

import numpy as np

from torchwise.tune.session import CALIBRATED_FIRST_LOOK, look_schedule
from torchwise.tune.stats import signed_rank_critical


def false_positive_rate(alpha: float, looks: list[int], diffs: np.ndarray) -> float:
    """Share of null sequences rejected at some look, plus one extra look at the end."""
    rejected = np.zeros(len(diffs), dtype=bool)
    for n in looks:
        x = diffs[:, :n]
        ranks = np.argsort(np.argsort(np.abs(x), axis=1), axis=1) + 1
        t_plus = (ranks * (x > 0)).sum(axis=1)
        t = np.minimum(t_plus, n * (n + 1) // 2 - t_plus)
        rejected |= t <= signed_rank_critical(n, alpha)
    return float(rejected.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=100_000)
    parser.add_argument("--max-rounds", type=int, default=150)
    parser.add_argument("--target", type=float, default=0.01)
    args = parser.parse_args()
    looks = sorted(look_schedule(CALIBRATED_FIRST_LOOK, args.max_rounds))
    # The extra look: a budget stop between two scheduled looks, at its worst
    # halfway between the first two.
    looks_with_stop = sorted({*looks, (looks[0] + looks[1]) // 2})
    diffs = np.random.default_rng(0).standard_normal((args.sequences, args.max_rounds))
    print(f"looks: {looks} ({len(looks)}), plus a budget stop")
    for alpha in (args.target / (len(looks) + 2), 0.0010, 0.0011, 0.0012, 0.0013, 0.0014):
        rate = false_positive_rate(alpha, looks_with_stop, diffs)
        print(f"per-look alpha {alpha:.5f}: overall false positives {rate:.4%}")


if __name__ == "__main__":
    main()
