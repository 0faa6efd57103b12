"""Statistics for A/B timings on a noisy machine: is this knob faster, slower, or neither?

The design, and why:

- Trials are interleaved in *rounds* (every arm once per round, in a shuffled
  order), and each arm's sample is paired with the baseline's sample of the same
  round. Machine load that drifts over seconds (another job starting) then
  scales both members of a pair and cancels in their ratio.
- Timings are compared as log ratios, ``d = log(t_arm) - log(t_base)``: a 2x
  slowdown and a 2x speedup are equally far from 0, and a load factor is an
  additive constant that the pairing removes.
- The estimate is the Hodges-Lehmann estimator of the paired log ratios (the
  median of their Walsh averages) and its confidence interval is the exact one
  that inverts the Wilcoxon signed-rank test. Both are rank-based: one step
  pre-empted by the scheduler (a 3x outlier) moves them by one rank, not by its
  size. Neither assumes normal timings.
- A verdict needs both significance *and* a minimum effect size: ``faster`` when
  the whole interval lies below a ratio of 1 and the estimate is at least
  ``min_effect`` better; ``slower`` symmetrically; otherwise "no significant
  difference". The minimum effect keeps a real but negligible 1% difference (or
  a small systematic bias such as cache warmth) from becoming advice.

Everything here is a deterministic function of lists of floats, with no clock:
tests drive it with synthetic timings.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

#: Above this many pairs the signed-rank null distribution is replaced by its
#: normal approximation (with continuity correction); exact below.
_EXACT_MAX_N = 60


class Verdict(str, enum.Enum):
    """Outcome of comparing an arm with the baseline."""

    FASTER = "faster"
    SLOWER = "slower"
    SAME = "no significant difference"


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile with linear interpolation (numpy's default method)."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def iqr(values: Sequence[float]) -> tuple[float, float]:
    """The 25th and 75th percentiles."""
    return quantile(values, 0.25), quantile(values, 0.75)


@cache
def _signed_rank_cdf(n: int) -> tuple[float, ...]:
    """P(T <= t) for t = 0..n(n+1)/2, T the signed-rank statistic of n pairs under H0.

    T is the sum of the ranks with a positive sign; under H0 each rank's sign is a
    fair coin, so the number of sign patterns with sum t is the number of subsets
    of {1..n} summing to t (a subset-sum count, built rank by rank).
    """
    top = n * (n + 1) // 2
    counts = [0] * (top + 1)
    counts[0] = 1
    for rank in range(1, n + 1):
        for t in range(top, rank - 1, -1):
            counts[t] += counts[t - rank]
    total = 2**n
    cdf, running = [], 0
    for c in counts:
        running += c
        cdf.append(running / total)
    return tuple(cdf)


def signed_rank_critical(n: int, alpha: float) -> int:
    """The largest k with P(T <= k) <= alpha / 2, or -1 when none exists (n too small).

    The two-sided (1 - alpha) interval is then [W_(k+1), W_(M-k)] over the M sorted
    Walsh averages (Hollander & Wolfe, Nonparametric Statistical Methods, 3.2).
    """
    if n <= _EXACT_MAX_N:
        cdf = _signed_rank_cdf(n)
        k = -1
        for t, p in enumerate(cdf):
            if p > alpha / 2:
                break
            k = t
        return k
    mean = n * (n + 1) / 4
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    z = _normal_quantile(1 - alpha / 2)
    return max(-1, math.floor(mean - z * sd - 0.5))


def signed_rank_p_value(diffs: Sequence[float]) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test of ``median(diffs) == 0``.

    Zero differences are dropped (Wilcoxon's convention); ties in ``|d|`` get
    average ranks, and the exact distribution is then an approximation.
    """
    nonzero = [d for d in diffs if d != 0]
    n = len(nonzero)
    if n == 0:
        return 1.0
    ranks = _average_ranks([abs(d) for d in nonzero])
    t_plus = sum(r for r, d in zip(ranks, nonzero, strict=True) if d > 0)
    t = min(t_plus, n * (n + 1) / 2 - t_plus)
    if n <= _EXACT_MAX_N:
        cdf = _signed_rank_cdf(n)
        return min(1.0, 2 * cdf[math.floor(t)])
    mean = n * (n + 1) / 4
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    z = (t - mean + 0.5) / sd
    return min(1.0, 2 * _normal_cdf(z))


def _average_ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _normal_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def _normal_quantile(p: float) -> float:
    # Bisection on the CDF: only called for n > 60, where precision to 1e-9 is plenty.
    low, high = -10.0, 10.0
    for _ in range(80):
        mid = (low + high) / 2
        if _normal_cdf(mid) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def hodges_lehmann(diffs: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """(estimate, low, high) of the centre of ``diffs`` with a ``confidence`` interval.

    The interval bounds are infinite when there are too few pairs for any interval
    at that confidence (fewer than 8 at 99%, 6 at 95%).
    """
    n = len(diffs)
    if n == 0:
        return 0.0, -math.inf, math.inf
    # The M = n(n+1)/2 pairwise means: each pair once, each value with itself.
    # Plain Python beats a tensor sort here: n is at most a few hundred, and
    # torch's threads would compete with the very timings being judged.
    walsh = sorted((diffs[i] + diffs[j]) / 2 for i in range(n) for j in range(i, n))
    estimate = median(walsh)
    k = signed_rank_critical(n, 1 - confidence)
    if k < 0:
        return estimate, -math.inf, math.inf
    return estimate, walsh[k], walsh[len(walsh) - 1 - k]


@dataclass(frozen=True)
class Comparison:
    """An arm against the baseline: the paired time ratio, its interval and the verdict.

    ``ratio`` is time(arm) / time(baseline): 0.8 means the arm's step takes 80% of
    the baseline's, a speedup of 1.25x.
    """

    rounds: int
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    min_effect: float
    verdict: Verdict
    settled: bool
    reason: str
    #: the low end of the futility interval when it settled the comparison (see
    #: :func:`compare`'s ``futility``): the bound on the speedup left, at its level
    futility_low: float | None = None

    @property
    def speedup(self) -> float:
        return 1 / self.ratio

    @property
    def gain(self) -> float:
        """Fraction of step time saved (negative when slower)."""
        return 1 - self.ratio


def compare(
    arm_times: Sequence[float],
    base_times: Sequence[float],
    *,
    confidence: float = 0.99,
    min_effect: float = 0.05,
    equivalence: float | None = None,
    futility: float | None = None,
) -> Comparison:
    """Compare paired per-step times (``arm_times[i]`` and ``base_times[i]`` from round i).

    ``settled`` says whether measuring on is pointless: a faster/slower verdict
    is settled, and so is "no significant difference" once the interval lies
    inside ``[1/(1+equivalence), 1+equivalence]`` (default ``min_effect``), i.e.
    any effect left is too small to act on.

    With ``futility``, a confidence (for a caller that only acts on "faster",
    tune's search), a verdict other than "faster" is also settled once the low
    end of an interval at that confidence is at least ``1/(1+min_effect)``: no
    speedup worth having is left in it. The verdict itself does not change.
    Stopping for futility can only take away chances of a false "faster", never
    add one, so its level need not be the verdict's: it trades only power, the
    chance that an arm truly just over ``min_effect`` faster is stopped before
    its "faster" (a non-binding futility bound, in group-sequential terms). The
    same interval must also rule out a slowdown of ``equivalence``: measuring on
    gives a large slowdown its "slower" verdict, the same on every run, rather
    than a "no significant difference" from an early look that happened to
    read it small (at a 90% futility level with only the estimate required below
    ``1 + equivalence``, a 25%-slower arm of the session tests was stopped so in
    6 runs of 100).
    """
    equivalence = min_effect if equivalence is None else max(equivalence, min_effect)
    if len(arm_times) != len(base_times):
        raise ValueError("paired samples must have the same length")
    diffs = [math.log(a) - math.log(b) for a, b in zip(arm_times, base_times, strict=True)]
    estimate, low, high = hodges_lehmann(diffs, confidence)
    ratio, ci_low, ci_high = math.exp(estimate), _exp(low), _exp(high)
    p_value = signed_rank_p_value(diffs)
    faster_edge, slower_edge = 1 / (1 + min_effect), 1 + min_effect
    level = f"{format_confidence(confidence)} CI"
    n = len(diffs)
    futility_low = None
    # The futility interval: its low end bounds the speedup left; its high end
    # must rule out an ``equivalence`` slowdown too (see above), else a large
    # slowdown could be stopped at an early, lucky look.
    low_f, high_f = 0.0, math.inf
    if futility is not None:
        _, f_low, f_high = hodges_lehmann(diffs, futility)
        low_f, high_f = _exp(f_low), _exp(f_high)
    if ci_high < 1 and ratio <= faster_edge:
        verdict, settled = Verdict.FASTER, True
        reason = f"{level} of the time ratio [{ci_low:.3f}, {ci_high:.3f}] is below 1"
    elif ci_low > 1 and ratio >= slower_edge:
        verdict, settled = Verdict.SLOWER, True
        reason = f"{level} of the time ratio [{ci_low:.3f}, {ci_high:.3f}] is above 1"
    elif 1 / (1 + equivalence) <= ci_low and ci_high <= 1 + equivalence:
        verdict, settled = Verdict.SAME, True
        reason = f"{level} [{ci_low:.3f}, {ci_high:.3f}] rules out effects over {equivalence:.0%}"
    elif futility is not None and low_f >= faster_edge and high_f < 1 + equivalence:
        verdict, settled, futility_low = Verdict.SAME, True, low_f
        reason = (
            f"{format_confidence(futility)} CI [{low_f:.3f}, {high_f:.3f}] rules out a speedup "
            f"of {min_effect:.0%} or more; {level} [{ci_low:.3f}, {ci_high:.3f}]"
        )
    else:
        verdict, settled = Verdict.SAME, False
        if math.isinf(low):
            reason = f"too few rounds ({n}) for a {level}"
        elif ci_low < 1 < ci_high:
            reason = f"{level} [{ci_low:.3f}, {ci_high:.3f}] includes 1 after {n} rounds"
        else:
            reason = (
                f"significant but smaller than the {min_effect:.0%} minimum effect "
                f"({level} [{ci_low:.3f}, {ci_high:.3f}])"
            )
    return Comparison(
        n,
        ratio,
        ci_low,
        ci_high,
        confidence,
        p_value,
        min_effect,
        verdict,
        settled,
        reason,
        futility_low,
    )


def format_confidence(confidence: float) -> str:
    """0.99 -> "99%", 0.999375 -> "99.94%"."""
    text = f"{confidence * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def min_pairs(confidence: float) -> int:
    """The fewest pairs for which a signed-rank interval at ``confidence`` exists.

    With n pairs the most extreme outcome (all signs alike) has probability
    2 * 2**-n; an interval exists once that is at most 1 - confidence.
    """
    return math.ceil(math.log2(2 / (1 - confidence)))


def _exp(value: float) -> float:
    if value == math.inf:
        return math.inf
    if value == -math.inf:
        return 0.0
    return math.exp(value)
